"""make publish (course.authoring.publish): the student repository holds no solution that is not yet due, links only to itself
and the student repository, is the same tree each time, and is never written over a hand edit. Every date is given
(--now); none is read from the clock."""

import json
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from course.authoring.build import REPO_LINK, _parts
from course.authoring.publish import (
    ANY_LMS,
    CPU_INDEX,
    MANIFEST,
    RUBRIC,
    STUDENT_TEXT,
    PublishError,
    destination,
    late_rule,
    main,
    publish,
    schedule,
    student_text,
    with_lms,
)
from course.authoring.reproduced import own_secret_lines
from course.cells import read, role
from course.layout import ROOT, notebooks, steps
from course.settings import SettingsError, load, parse

WEEK = timedelta(days=7)
START = datetime(2027, 1, 11, 9, tzinfo=timezone(timedelta(hours=1)))
STUDENTS = 'example-school/transformer-students'  # not the placeholder course.toml ships with, which make publish refuses


def config(dated=True, solution=True, publish=None, **overrides):
    """course.toml's settings with the student repository STUDENTS (and publish's other keys), a weekly schedule from
    START (each step due a week after its release, the next released an hour later) and solution set for every step,
    unless overridden per step."""
    s = load()
    given = {'github': s.github, 'branch': s.branch, 'data': {'url': s.data.url, 'sha256': s.data.sha256},
             'publish': {'github': STUDENTS, **(publish or {})}, 'schedule': {}}
    for i, step in enumerate(steps()):
        entry = {'solution': solution}
        if dated:
            entry |= {'release': START + i * (WEEK + timedelta(hours=1)), 'due': START + (i + 1) * WEEK + i * timedelta(hours=1)}
        given['schedule'][step] = entry | overrides.get(step, {})
    return parse(given)


MID = config()
MID_NOW = MID.schedule['step5'].release + timedelta(days=1)  # Steps 1-4 past due, Step 5 open, Step 6 not released


def files_of(tree):
    return sorted(p.relative_to(tree).as_posix() for p in tree.rglob('*') if p.is_file())


def text_of(path):
    """What a reader of the file sees: a notebook's cell sources, outputs and attachments; any other file's bytes as
    text."""
    if path.suffix != '.ipynb':
        return path.read_bytes().decode('utf-8', 'replace')
    nb = read(path)
    parts = []
    for cell in nb.cells:
        parts += [cell.source, json.dumps(cell.get('attachments', {}), ensure_ascii=False)]
        for out in cell.get('outputs', []):
            parts += [out.get('text', ''), out.get('evalue', ''), *out.get('traceback', [])]
            parts += [v if isinstance(v, str) else json.dumps(v) for v in out.get('data', {}).values()]
    return '\n'.join(parts)


def leaks(tree, not_due):
    """{file: {step: [lines]}}: the lines of each not-due step's solution regions, hidden tests and written answers
    (course.authoring.reproduced.secret_lines: its model answers and rubrics) found anywhere in the files under tree, leaving out
    the lines that the step's own release shows anyway, or an earlier step wrote (own_secret_lines)."""
    secret = {s: own_secret_lines(s) for s in not_due}
    found = {}
    for path in sorted(p for p in Path(tree).rglob('*') if p.is_file()):
        text = text_of(path)
        hits = {s: sorted(line for line in lines if line in text) for s, lines in secret.items()}
        hits = {s: lines for s, lines in hits.items() if lines}
        if hits:
            found[path.relative_to(tree).as_posix()] = hits
    return found


@pytest.fixture(scope='module')
def mid_course(tmp_path_factory):
    out = tmp_path_factory.mktemp('student')
    _, states = publish(out, MID_NOW, config=MID)
    return out, states


def test_mid_course_publishes_what_is_due_and_nothing_else(mid_course):
    out, st = mid_course
    assert {s: (x.open, x.past_due, x.solution) for s, x in st.items()} == {
        **{s: (True, True, True) for s in ('step1', 'step2', 'step3', 'step4')}, 'step5': (True, False, False),
        **{s: (False, False, False) for s in steps()[steps().index('step5') + 1:]}}, 'the schedule is not mid-course as meant'
    published = {p.split('/')[0] for p in files_of(out) if '/' in p}
    assert published == {'step1', 'step2', 'step3', 'step4', 'step5'}, f'expected Steps 1-5 published, got {published}'
    for step in ('step1', 'step2', 'step3', 'step4'):
        for name in notebooks(step):
            assert (out / step / 'solution' / name).is_file(), f'{step} is past due with solution = true: no {name}'
    assert not (out / 'step5' / 'solution').exists(), 'Step 5 is not past due: its solution must not be published'


def test_mid_course_shows_no_line_of_a_solution_not_yet_due(mid_course):
    """Over every file of the published tree: no line of a solution region, hidden test, model answer or rubric of Step 5
    (open, not due) or of a later step (not released). The same scan of Step 6's release finds Step 5's solution (it
    rebuilds Step 5's block), and of Step 7's release Step 6's, so it is a scan that finds a leak when there is one."""
    out, _ = mid_course
    found = leaks(out, steps()[4:])
    assert not found, f'solution lines of a step not yet due are published: {found}'
    step6 = leaks(ROOT / 'release' / 'step6', ['step5'])
    assert step6, 'the scan finds none of Step 5\'s solution in Step 6\'s release, which rebuilds it: the scan is blind'
    step7 = leaks(ROOT / 'release' / 'step7', ['step6'])
    assert step7, 'the scan finds none of Step 6\'s solution in Step 7\'s release, which rebuilds it: the scan is blind'


@pytest.mark.parametrize('later, earlier', [('step6', 'step5'), ('step7', 'step6')])
def test_a_step_opens_only_after_every_step_it_reproduces_is_past_due(tmp_path, later, earlier):
    """Step 6 released while Step 5 is still open (Step 7 while Step 6 is): it shows the earlier step's solution, so it
    waits for that step's due date."""
    c = config(**{later: {'release': MID.schedule[earlier].release + timedelta(days=2)}})
    early = c.schedule[later].release + timedelta(hours=1)
    lines, st = publish(tmp_path / 'a', early, config=c)
    assert not st[later].open and st[later].opens == c.schedule[earlier].due, st[later]
    assert any(line.startswith(f'note: {later}') and earlier in line for line in lines), lines
    assert not leaks(tmp_path / 'a', [later])
    open_not_due = leaks(tmp_path / 'a', [earlier])  # its own release is out, and may name a line of its solution in prose
    assert not {f: hits for f, hits in open_not_due.items() if not f.startswith(f'{earlier}/')}, open_not_due
    _, st = publish(tmp_path / 'b', c.schedule[earlier].due + timedelta(minutes=1), config=c)
    assert st[later].open, f'{later} should open once {earlier} is past due'


def test_nothing_of_the_instructor_is_published(tmp_path):
    """Self-paced (every step published, every solution asked for): still no source/, notebooks/, instructor/,
    autograded/, gradebook or feedback."""
    _, st = publish(tmp_path, MID_NOW, config=config(dated=False))
    assert all(x.open for x in st.values())
    forbidden = {'source', 'notebooks', 'instructor', 'autograded', 'feedback', 'submitted', 'results', 'reports'}
    bad = [p for p in files_of(tmp_path) if forbidden & set(p.split('/')) or p.endswith(('.db', '.db-wal', '.csv'))
           or 'feedback' in p or 'gradebook' in p or p.startswith('.build')]
    assert not bad, f'instructor material published: {bad}'
    readme = (tmp_path / 'README.md').read_text()
    assert 'self-paced' in readme, 'a self-paced course\'s README should say so'
    assert (tmp_path / 'step6' / 'step6_gpt.pt').read_bytes() == (ROOT / 'release' / 'step6' / 'step6_gpt.pt').read_bytes()


LINK = re.compile(r'\]\(\s*<?([^)\s>]+)|<(https?://[^>\s]+)>|(https?://[^\s)\'"\]>\\`]+)')


def test_every_link_resolves_in_the_tree_or_names_the_student_repository(tmp_path):
    """Self-paced, so that every step and solution is there. A relative link resolves to a file of the tree; a link to
    a GitHub file (Colab, raw, github.com) names the student repository and a file the tree has, or another project (the
    data's char-rnn); this repository's name appears in no file."""
    c = config(dated=False)
    publish(tmp_path, MID_NOW, config=c)
    student, mine = c.publish.github, c.github
    problems, checked = [], 0
    for rel in files_of(tmp_path):
        if rel == MANIFEST or rel.endswith('.pt'):
            continue
        text = text_of(tmp_path / rel)
        if re.search(rf'{re.escape(mine)}(?![\w.-])', text):
            problems.append(f'{rel} names this repository, {mine}')
        for m in REPO_LINK.finditer(text):
            checked += 1
            _, repo, _, _, path = _parts(m)
            if repo == student and not (tmp_path / path).is_file():
                problems.append(f'{rel}: {m[0]} names a file the student repository does not have')
            elif repo not in (student, 'karpathy/char-rnn'):
                problems.append(f'{rel}: {m[0]} names {repo}')
        for m in LINK.finditer(text):
            target = next(g for g in m.groups() if g)
            if re.match(r'[a-z]+:', target):
                continue
            checked += 1
            if not (tmp_path / rel).parent.joinpath(target.split('#')[0]).resolve().is_file():
                problems.append(f'{rel}: the link {target} resolves to no file of the tree')
    assert checked > 2 * len(steps()), f'only {checked} links checked: the link finder is broken'
    assert not problems, '\n'.join(problems)


def test_publishing_twice_gives_the_same_tree(tmp_path):
    publish(tmp_path / 'a', MID_NOW, config=MID)
    first = {p: (tmp_path / 'a' / p).read_bytes() for p in files_of(tmp_path / 'a')}
    lines, _ = publish(tmp_path / 'a', MID_NOW, config=MID)
    assert not [line for line in lines if line.startswith(('wrote', 'removed'))], lines
    again = {p: (tmp_path / 'a' / p).read_bytes() for p in files_of(tmp_path / 'a')}
    assert again == first
    publish(tmp_path / 'b', MID_NOW, config=MID)
    assert {p: (tmp_path / 'b' / p).read_bytes() for p in files_of(tmp_path / 'b')} == first


def test_a_later_date_adds_steps_and_keeps_a_git_folder(tmp_path):
    (tmp_path / '.git').mkdir(parents=True)
    (tmp_path / '.git' / 'HEAD').write_text('ref: refs/heads/main\n')
    publish(tmp_path, MID_NOW, config=MID)
    lines, st = publish(tmp_path, MID.schedule['step6'].due + timedelta(days=1), config=MID)
    assert st['step6'].open and (tmp_path / 'step6' / 'step6_tiny_gpt.ipynb').is_file()
    assert (tmp_path / '.git' / 'HEAD').is_file(), 'make publish must leave the repository\'s .git alone'
    assert f'wrote {tmp_path}/step5/solution/step5_multihead_block.ipynb' in lines


def run_main(capsys, *args):
    with pytest.raises(SystemExit) as e:
        main(list(args))
    return str(e.value.code)


@pytest.fixture
def mid(monkeypatch):
    """The command (main) on MID's settings, not the course's own course.toml (which names the placeholder)."""
    import course.authoring.publish as P

    monkeypatch.setattr(P, 'load', lambda root=ROOT: MID)


@pytest.mark.parametrize('edit', ['change', 'add'])
def test_a_hand_edit_is_refused_in_one_line_and_kept(tmp_path, capsys, mid, edit):
    now = MID_NOW.isoformat()
    main(['--now', now, '--out', str(tmp_path)])
    target = tmp_path / ('README.md' if edit == 'change' else 'step1/notes.md')
    target.write_text('my own notes\n')
    message = run_main(capsys, '--now', now, '--out', str(tmp_path))
    assert message.startswith('error: ') and '\n' not in message and target.name in message, message
    assert target.read_text() == 'my own notes\n', 'the hand edit was lost'
    main(['--now', now, '--out', str(tmp_path), '--force'])
    assert (target.read_text() != 'my own notes\n') if edit == 'change' else not target.exists()


def test_a_folder_make_publish_did_not_write_is_refused(tmp_path, capsys, mid):
    (tmp_path / 'thesis.tex').write_text('mine\n')
    message = run_main(capsys, '--now', MID_NOW.isoformat(), '--out', str(tmp_path))
    assert 'thesis.tex' in message and '\n' not in message
    assert files_of(tmp_path) == ['thesis.tex']


def test_a_half_dated_schedule_is_refused_and_a_bad_line_stops_on_load():
    """Every step dated or none (publish's own rule); a bad line of the schedule never reaches publish: course.settings
    refuses it on load, naming it (tests/test_settings.py has a case for each kind)."""
    s = load()
    given = {'github': s.github, 'data': {'url': s.data.url, 'sha256': s.data.sha256}, 'publish': {'github': STUDENTS},
             'schedule': {step: {'release': START + i * WEEK, 'due': START + (i + 1) * WEEK}
                          for i, step in enumerate(steps()) if step != 'step3'}}
    with pytest.raises(PublishError, match=r'^course.toml: \[schedule\] dates step1, step2, step4.* but not step3: date '
                                           'every step, or none'):
        schedule(parse(given))
    given['schedule']['step9'] = {'release': START, 'due': START + WEEK}
    with pytest.raises(SettingsError, match=r'^course.toml: \[schedule\] step9: there is no step step9 in source/'):
        parse(given)


def test_now_without_a_timezone_is_refused(capsys, mid):
    assert 'no timezone' in run_main(capsys, '--now', '2027-02-01T12:00:00', '--out', '/nonexistent/never-written')


@pytest.mark.parametrize('handin', ['lms', 'hub'])
def test_the_readme_hands_in_as_the_docs_tell_students_with_the_late_rule_of_nbgrader_config(tmp_path, handin):
    """The README's "Handing in" is the docs section that tells students (docs/lms.md's For students, or
    docs/publishing.md's For students on the hub), as it is, and not the other one; then the late rule that
    nbgrader_config.py sets ('zero')."""
    c = config(publish={'handin': handin, 'handin_url': 'https://lms.example.edu/course/7'})
    publish(tmp_path, MID_NOW, config=c)
    section = (tmp_path / 'README.md').read_text().split('## Handing in\n')[1].split('\n## ')[0]
    other = next(h for h in STUDENT_TEXT if h != handin)
    told = with_lms(student_text(handin), 'Canvas') if handin == 'lms' else student_text(handin)
    assert told in section and student_text(other) not in section, section
    assert 'Where: <https://lms.example.edu/course/7>' in section
    assert 'after its due date scores 0' in section, 'nbgrader_config.py gives late work 0: the README should say so'


def test_the_hub_text_names_nbgraders_own_buttons():
    """Every button and heading the hub text puts in bold is a label of nbgrader's JupyterLab extension, as installed."""
    import sys

    bundle = Path(sys.prefix) / 'share' / 'jupyter' / 'labextensions' / '@jupyter' / 'nbgrader' / 'static'
    js = '\n'.join(p.read_text(errors='replace') for p in bundle.glob('*.js'))
    assert 'Fetch Feedback' in js, f'nbgrader\'s JupyterLab extension is not at {bundle}'
    named = [label for bold in re.findall(r'\*\*(.+?)\*\*', student_text('hub'))
             for label in re.split(r' > ', bold.strip('()'))]
    assert len(named) >= 8, named
    missing = [label for label in named if label not in js]
    assert not missing, f'the hub text names what nbgrader\'s Assignments panel does not show: {missing}'


@pytest.mark.parametrize('settings_line, says', [
    ("c.LateSubmissionPlugin.penalty_method = 'zero'", 'scores 0'),
    ("c.LateSubmissionPlugin.penalty_method = 'none'", 'as if it were on time'),
    ('', 'as if it were on time'),  # nbgrader's default
    ("c.AssignLatePenalties.plugin_class = 'mycourse.HalfOff'", "course's own rule"),
])
def test_the_late_rule_is_read_from_nbgrader_config(tmp_path, settings_line, says):
    (tmp_path / 'nbgrader_config.py').write_text(f'c = get_config()  # noqa: F821\n{settings_line}\n')
    assert says in late_rule(tmp_path)


def test_the_local_install_takes_the_cpu_build_of_torch(tmp_path):
    """pip itself, offline, on the published requirements.txt: offered torch 2.13.0 (PyPI's: on Linux, the CUDA build)
    and 2.13.0+cpu (PyTorch's CPU index, which the file names), it takes the CPU build; the file is one pip reads."""
    import os
    import subprocess
    import sys
    import zipfile

    from packaging.version import Version

    publish(tmp_path / 'student', MID_NOW, config=MID)
    lines = (tmp_path / 'student' / 'requirements.txt').read_text().splitlines()
    assert f'--extra-index-url {CPU_INDEX}' in lines, lines
    pins = dict(line.split('==') for line in lines if line and not line.startswith(('#', '-')))
    assert pins['torch'] == '2.13.0' and Version('2.13.0+cpu') > Version('2.13.0')
    wheels = tmp_path / 'wheels'
    wheels.mkdir()
    for name, version in [*pins.items(), ('torch', '2.13.0+cpu')]:
        info = f'{name}-{version}.dist-info'
        with zipfile.ZipFile(wheels / f'{name}-{version}-py3-none-any.whl', 'w') as z:
            z.writestr(f'{info}/METADATA', f'Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n')
            z.writestr(f'{info}/WHEEL', 'Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n')
            z.writestr(f'{info}/RECORD', '')
    env = {k: v for k, v in os.environ.items() if not k.startswith('PIP_')} | {'PIP_CONFIG_FILE': os.devnull}
    done = subprocess.run([sys.executable, '-m', 'pip', 'install', '--dry-run', '--no-deps', '--ignore-installed',
                           '--no-index', '--find-links', str(wheels), '--report', str(tmp_path / 'report.json'),
                           '--quiet', '-r', str(tmp_path / 'student' / 'requirements.txt')],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    chosen = {i['metadata']['name']: i['metadata']['version']
              for i in json.loads((tmp_path / 'report.json').read_text())['install']}
    assert chosen == {**pins, 'torch': '2.13.0+cpu'}, chosen


def test_now_previews_in_a_folder_of_its_own_and_every_line_names_the_folder(tmp_path):
    """NOW=... make publish (--now without --out) writes <[publish] folder>-preview/, never the folder pushed to students;
    without NOW, the [publish] folder; OUT= wherever it says. What it writes is said with the folder."""
    later = datetime.now(timezone.utc) + timedelta(days=30)
    assert destination(None, later, ROOT, MID) == ROOT / 'student-preview'
    assert destination(None, None, ROOT, MID) == ROOT / 'student'
    assert destination(tmp_path, later, ROOT, MID) == tmp_path
    lines, _ = publish(tmp_path / 'out', later, config=MID)
    wrote = [line for line in lines if line.startswith('wrote ')]
    assert f'wrote {tmp_path / "out"}/README.md' in wrote and all(f' {tmp_path / "out"}/' in line for line in wrote), wrote


def test_the_placeholder_student_repository_is_refused_and_nothing_written(tmp_path, capsys):
    """course.toml ships a placeholder [publish] github: every badge would open a repository that is not the class's."""
    with pytest.raises(SettingsError, match=r'\[publish\] github is build-a-transformer/course-students, the placeholder'):
        publish(tmp_path, MID_NOW, config=config(publish={'github': 'build-a-transformer/course-students'}))
    assert not any(tmp_path.iterdir())
    message = run_main(capsys, '--now', MID_NOW.isoformat(), '--out', str(tmp_path))  # the course's own course.toml
    assert message.startswith('error: course.toml: [publish] github is ') and '\n' not in message, message


def test_anything_still_naming_this_repository_is_refused(tmp_path, monkeypatch):
    """A mention of this repository that relinking did not point at the student repository (a link to its front page,
    say) stops publishing, naming the file."""
    import course.authoring.publish as P

    monkeypatch.setattr(P, 'local_requirements', lambda root: f'# from https://github.com/{load().github}\n')
    with pytest.raises(PublishError, match=r'^requirements.txt would name this repository'):
        publish(tmp_path, MID_NOW, config=MID)
    assert not any(tmp_path.iterdir())


def test_the_published_notebooks_are_the_releases_and_solutions_with_student_links(tmp_path):
    """Only links change: every cell of a published notebook is its release's (a published solution: its executed
    solution's, outputs included), with this repository's name and folders replaced by the student repository's. So the
    Colab runs of release/ and notebooks/ (tests/test_colab_runtime.py) run what students get."""
    c = config(dated=False, publish={'hidden_tests': True})

    def student(text, step, name):
        return (text.replace(c.github, c.publish.github).replace('/release/', '/')
                .replace(f'/notebooks/{name}', f'/{step}/solution/{name}'))

    publish(tmp_path, MID_NOW, config=c)
    compared = 0
    for step in steps():
        for name in notebooks(step):
            pairs = [(ROOT / 'release' / step / name, tmp_path / step / name),
                     (ROOT / 'notebooks' / name, tmp_path / step / 'solution' / name)]
            for mine, theirs in pairs:
                want, got = read(mine), read(theirs)
                assert [student(cell.source, step, name) for cell in want.cells] == [cell.source for cell in got.cells], (
                    f'{theirs.relative_to(tmp_path)} differs from {mine.relative_to(ROOT)} by more than its links')
                assert [cell.get('outputs') for cell in want.cells] == [cell.get('outputs') for cell in got.cells]
                compared += 1
    assert compared == 2 * sum(len(notebooks(s)) for s in steps())


@pytest.mark.parametrize('folder', ['.', 'release', 'source/step1', '..'])
def test_a_folder_that_holds_the_course_is_refused(folder):
    """--force there would remove every file make publish did not write: the course itself."""
    with pytest.raises(PublishError, match='holds the course itself'):
        publish(ROOT / folder, MID_NOW, config=MID, force=True)


def test_an_out_that_is_a_file_is_refused(tmp_path):
    (tmp_path / 'notes.txt').write_text('mine\n')
    with pytest.raises(PublishError, match=r'notes.txt: not a folder'):
        publish(tmp_path / 'notes.txt', MID_NOW, config=MID)
    assert (tmp_path / 'notes.txt').read_text() == 'mine\n'


def test_a_published_solution_has_no_hidden_test_or_rubric_unless_asked(tmp_path):
    """By default a published solution keeps its model answers but not its hidden tests or its rubrics (the next class's
    grading); [publish] hidden_tests = true keeps them."""
    publish(tmp_path / 'default', MID_NOW, config=config(dated=False))
    publish(tmp_path / 'all', MID_NOW, config=config(dated=False, publish={'hidden_tests': True}))
    checked = 0
    for step in steps():
        hidden = hidden_lines(step)
        rubrics = [line for c in source_cells(step) if role(c) == 'answer' for line in RUBRIC.search(c.source)[0].splitlines()
                   if len(line.strip()) > 20]
        assert rubrics, f'{step}: no rubric found in its written answers'
        for name in notebooks(step):
            default = text_of(tmp_path / 'default' / step / 'solution' / name)
            everything = text_of(tmp_path / 'all' / step / 'solution' / name)
            leaked = [line for line in hidden + rubrics if line.strip() in default]
            assert not leaked, f'{step}/solution/{name} publishes hidden tests or rubrics: {leaked[:3]}'
            assert all(line.strip() in everything for line in hidden + rubrics), f'hidden_tests = true lost some in {name}'
            checked += len(hidden) + len(rubrics)
        answers = [c for name in notebooks(step) for c in read(tmp_path / 'default' / step / 'solution' / name).cells
                   if role(c) == 'answer']
        assert all(len(c.source) > 80 for c in answers), f'{step}: a model answer went with its rubric'
    assert checked > 50


def source_cells(step):
    return [c for name in notebooks(step) for c in read(ROOT / 'source' / step / name).cells]


def hidden_lines(step):
    """The lines of the step's hidden tests that no visible part of its source shows."""
    region = re.compile(r'^[ \t]*### BEGIN HIDDEN TESTS[ \t]*\n(.*?)^[ \t]*### END HIDDEN TESTS', re.M | re.S)
    shown = {line.strip() for c in source_cells(step) for line in region.sub('', c.source).splitlines()}
    return [line.strip() for c in source_cells(step) for body in region.findall(c.source) for line in body.splitlines()
            if len(line.strip()) > 20 and not any(line.strip() in seen for seen in shown)]


def test_every_written_answer_ends_with_its_rubric():
    """The form make publish relies on to leave rubrics out of published solutions (publish.RUBRIC): in every step's
    source, each written answer's last paragraph starts with *Rubric (or **Rubric), and nothing else does."""
    for step in steps():
        for c in source_cells(step):
            if role(c) == 'answer':
                m = RUBRIC.search(c.source)
                gid = c.metadata.nbgrader.grade_id
                assert m and '\n\n' not in m[0].strip(), f'{step} {gid}: its rubric is not its last paragraph'


@pytest.mark.parametrize('lms', ['Canvas', 'Moodle', 'Brightspace'])
def test_the_readme_names_the_courses_own_lms(tmp_path, lms):
    """[publish] lms: the README's Handing in names it where the docs' text names every LMS, and keeps no sentence
    meant for another one."""
    publish(tmp_path, MID_NOW, config=config(publish={'lms': lms}))
    section = (tmp_path / 'README.md').read_text().split('## Handing in\n')[1].split('\n## ')[0]
    assert ANY_LMS in student_text('lms') and ANY_LMS not in section and f"course's {lms}" in section, section
    others = {'Canvas', 'Moodle', 'Brightspace'} - {lms}
    assert not [o for o in others if o in section], section
    assert with_lms(student_text('lms'), lms) in section


def test_files_url_moves_the_checkpoint_download_off_the_student_repository(tmp_path):
    """A private student repository refuses students its raw files (Step 6's checkpoint): [publish] files_url points
    that download at a folder that serves them (a release of a public repository); notebooks stay in the tree."""
    assets = 'https://github.com/example-school/transformer-assets/releases/download/v1/'
    publish(tmp_path, MID_NOW, config=config(dated=False, publish={'files_url': assets}))
    nb = (tmp_path / 'step6' / 'step6_tiny_gpt.ipynb').read_text()
    assert f'{assets}step6_gpt.pt' in nb and f'raw.githubusercontent.com/{STUDENTS}' not in nb
    assert f'colab.research.google.com/github/{STUDENTS}/blob/main/step6/step6_tiny_gpt.ipynb' in nb
    assert (tmp_path / 'step6' / 'step6_gpt.pt').is_file(), 'the checkpoint still ships in the tree, for a clone'
