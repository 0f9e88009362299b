"""Reports: what grading leaves behind, read by instructors and students. Each submission's result record (results),
nbgrader export's CSV tables (export), the class report (classreport), the grade table printed after grading (report),
the feedback page (feedback), and the filter that keeps student files a browser would run out of every page
(active_content)."""
