"""nbgrader settings of every server the hub starts (JUPYTER_CONFIG_PATH ends with this folder): the course and its
exchange, from the hub's environment (hub/jupyterhub_config.py). In the course directory, the course's own
nbgrader_config.py is read after this one and wins."""

import os

c = get_config()  # noqa: F821
c.CourseDirectory.course_id = os.environ.get('COURSE_ID', 'transformer-from-scratch')
c.Exchange.root = os.environ.get('COURSE_EXCHANGE', '/srv/nbgrader/exchange')
