"""nbgrader settings for this course; every key is documented at nbgrader.readthedocs.io (Configuration options)."""

from nbgrader.preprocessors import ClearMarkScheme, ClearOutput, IncludeHeaderFooter, LockCells

c = get_config()  # noqa: F821

c.CourseDirectory.course_id = 'transformer-from-scratch'
# One gradebook next to this file; timeout=60 lets a busy SQLite wait instead of aborting a write after 5 s.
c.CourseDirectory.db_url = 'sqlite:///gradebook.db?timeout=60'
c.CourseDirectory.solution_directory = '.build/solution'

# The stub students see in place of each solution region, and in each written answer.
c.ClearSolutions.code_stub = {'python': "# YOUR CODE HERE\nraise NotImplementedError('replace this line with your code')"}
c.ClearSolutions.text_stub = 'YOUR ANSWER HERE'

# tools/build.py removes the ### BEGIN/END marker lines and executes the solution itself (with nbclient).
c.GenerateSolution.preprocessors = [IncludeHeaderFooter, LockCells, ClearOutput, ClearMarkScheme]

c.Execute.timeout = 60  # seconds per cell
