"""The landing of an LTI launch, in the user's own Jupyter server (hub/lti_config.py sends each launch here, enabled by
this folder's jupyter_server_config.d): GET course-launch/<step>

- the step's feedback, once the instructor released it (nbgrader fetch_feedback): its page;
- else the step, fetched from nbgrader's exchange if it is not in the home yet (nbgrader fetch_assignment), open in
  JupyterLab;
- else (not released) a page saying so.
Everything runs as the user, with nbgrader's own commands and the course's exchange settings (hub/roles/common).
"""

import asyncio
import html
import re
from pathlib import Path

from jupyter_server.base.handlers import JupyterHandler
from jupyter_server.utils import url_escape, url_path_join
from tornado import web

STEP = re.compile(r'[A-Za-z0-9][A-Za-z0-9_-]{0,63}')


async def nbgrader(*args, cwd):
    process = await asyncio.create_subprocess_exec('nbgrader', *args, cwd=cwd, stdout=asyncio.subprocess.PIPE,
                                                   stderr=asyncio.subprocess.STDOUT)
    out, _ = await asyncio.wait_for(process.communicate(), timeout=300)
    return process.returncode, out.decode(errors='replace')


class LaunchHandler(JupyterHandler):
    @web.authenticated
    async def get(self, step):
        if not STEP.fullmatch(step):
            raise web.HTTPError(404, 'no such step')
        home = Path(self.settings['server_root_dir']).expanduser()
        folder = home / step
        if folder.is_dir():  # handed in before: its released feedback, if any (fetched anew each launch)
            await nbgrader('fetch_feedback', step, cwd=home)
            pages = sorted(folder.glob('feedback/*/*.html'))
            if pages:
                return self.redirect(url_path_join(self.base_url, 'files', url_escape(str(pages[-1].relative_to(home)))))
        else:
            await nbgrader('fetch_assignment', step, cwd=home)
            if not folder.is_dir():
                self.set_status(404)
                return self.finish(f'<!doctype html><title>{html.escape(step)}</title><p>{html.escape(step)} is not '
                                   'released yet: launch it again once your instructor has released it.</p>')
        notebooks = sorted(p.name for p in folder.glob('*.ipynb'))
        target = f'{step}/{notebooks[0]}' if notebooks else step
        self.redirect(url_path_join(self.base_url, 'lab', 'tree', url_escape(target)))


def _jupyter_server_extension_points():
    return [{'module': 'course_lti_launch'}]


def _load_jupyter_server_extension(server_app):
    web_app = server_app.web_app
    route = url_path_join(web_app.settings['base_url'], 'course-launch', '([^/]+)')
    web_app.add_handlers('.*$', [(route, LaunchHandler)])
