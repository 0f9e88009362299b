"""make publish (course.authoring.publish): the student repository holds no solution that is not yet due, links only to itself
and the student repository, is the same tree each time, and is never written over a hand edit. Every date is given
(--now); none is read from the clock."""

import copy
import json
import re
import tomllib
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from course.authoring.build import REPO_LINK, _parts
from course.authoring.publish import (
    CPU_INDEX,
    MANIFEST,
    STUDENT_TEXT,
    PublishError,
    late_rule,
    main,
    publish,
    schedule,
    student_text,
)
from course.authoring.reproduced import own_secret_lines
from course.cells import read
from course.layout import ROOT, notebooks, settings, steps

WEEK = timedelta(days=7)
START = datetime(2027, 1, 11, 9, tzinfo=timezone(timedelta(hours=1)))


def config(dated=True, solution=True, **overrides):
    """course.toml as parsed, with a weekly schedule from START (each step due a week after its release, the next
    released an hour later) and solution set for every step, unless overridden per step."""
    c = copy.deepcopy(settings(ROOT))
    c['schedule'] = {}
    for i, step in enumerate(steps()):
        entry = {'solution': solution}
        if dated:
            entry |= {'release': START + i * (WEEK + timedelta(hours=1)), 'due': START + (i + 1) * WEEK + i * timedelta(hours=1)}
        c['schedule'][step] = entry | overrides.get(step, {})
    return c


MID = config()
MID_NOW = MID['schedule']['step5']['release'] + timedelta(days=1)  # Steps 1-4 past due, Step 5 open, Step 6 not released


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
        **{s: (True, True, True) for s in ('step1', 'step2', 'step3', 'step4')},
        'step5': (True, False, False), 'step6': (False, False, False)}, 'the schedule is not mid-course as meant'
    published = {p.split('/')[0] for p in files_of(out) if '/' in p}
    assert published == {'step1', 'step2', 'step3', 'step4', 'step5'}, f'expected Steps 1-5 published, got {published}'
    for step in ('step1', 'step2', 'step3', 'step4'):
        for name in notebooks(step):
            assert (out / step / 'solution' / name).is_file(), f'{step} is past due with solution = true: no {name}'
    assert not (out / 'step5' / 'solution').exists(), 'Step 5 is not past due: its solution must not be published'


def test_mid_course_shows_no_line_of_a_solution_not_yet_due(mid_course):
    """Over every file of the published tree: no line of a solution region, hidden test, model answer or rubric of Step 5
    (open, not due) or Step 6 (not released). The same scan of Step 6's release finds Step 5's solution (it rebuilds
    Step 5's block), so it is a scan that finds a leak when there is one."""
    out, _ = mid_course
    found = leaks(out, ['step5', 'step6'])
    assert not found, f'solution lines of a step not yet due are published: {found}'
    step6 = leaks(ROOT / 'release' / 'step6', ['step5'])
    assert step6, 'the scan finds none of Step 5\'s solution in Step 6\'s release, which rebuilds it: the scan is blind'


def test_a_step_opens_only_after_every_step_it_reproduces_is_past_due(tmp_path):
    """Step 6 released while Step 5 is still open: Step 6 shows Step 5's solution, so it waits for Step 5's due date."""
    c = config(step6={'release': MID['schedule']['step5']['release'] + timedelta(days=2)})
    early = c['schedule']['step6']['release'] + timedelta(hours=1)
    lines, st = publish(tmp_path / 'a', early, config=c)
    assert not st['step6'].open and st['step6'].opens == c['schedule']['step5']['due'], st['step6']
    assert any(line.startswith('note: step6') and 'step5' in line for line in lines), lines
    assert not leaks(tmp_path / 'a', ['step5', 'step6'])
    _, st = publish(tmp_path / 'b', c['schedule']['step5']['due'] + timedelta(minutes=1), config=c)
    assert st['step6'].open, 'Step 6 should open once Step 5 is past due'


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
    student, mine = c['publish']['github'], c['github']
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
    lines, st = publish(tmp_path, MID['schedule']['step6']['due'] + timedelta(days=1), config=MID)
    assert st['step6'].open and (tmp_path / 'step6' / 'step6_tiny_gpt.ipynb').is_file()
    assert (tmp_path / '.git' / 'HEAD').is_file(), 'make publish must leave the repository\'s .git alone'
    assert 'wrote step5/solution/step5_multihead_block.ipynb' in lines


def run_main(capsys, *args):
    with pytest.raises(SystemExit) as e:
        main(list(args))
    return str(e.value.code)


@pytest.mark.parametrize('edit', ['change', 'add'])
def test_a_hand_edit_is_refused_in_one_line_and_kept(tmp_path, capsys, edit):
    now = MID_NOW.isoformat()
    main(['--now', now, '--out', str(tmp_path)])
    target = tmp_path / ('README.md' if edit == 'change' else 'step1/notes.md')
    target.write_text('my own notes\n')
    message = run_main(capsys, '--now', now, '--out', str(tmp_path))
    assert message.startswith('error: ') and '\n' not in message and target.name in message, message
    assert target.read_text() == 'my own notes\n', 'the hand edit was lost'
    main(['--now', now, '--out', str(tmp_path), '--force'])
    assert (target.read_text() != 'my own notes\n') if edit == 'change' else not target.exists()


def test_a_folder_make_publish_did_not_write_is_refused(tmp_path, capsys):
    (tmp_path / 'thesis.tex').write_text('mine\n')
    message = run_main(capsys, '--now', MID_NOW.isoformat(), '--out', str(tmp_path))
    assert 'thesis.tex' in message and '\n' not in message
    assert files_of(tmp_path) == ['thesis.tex']


@pytest.mark.parametrize('entry, said', [
    ({'release': '2027-01-11T09:00:00', 'due': '2027-01-18T09:00:00+00:00'}, 'no timezone'),
    ({'release': datetime(2027, 1, 11).date(), 'due': '2027-01-18T09:00:00+00:00'}, 'no time and timezone'),
    ({'release': '2027-01-18T09:00:00+00:00', 'due': '2027-01-11T09:00:00+00:00'}, 'not after release'),
    ({'release': 'next monday', 'due': '2027-01-11T09:00:00+00:00'}, 'not an ISO 8601'),
    ({'due': '2027-01-11T09:00:00+00:00'}, 'give both'),
    ({'relase': '2027-01-11T09:00:00+00:00'}, 'only release, due and solution'),
    ({'solution': 'false'}, "solution is 'false': write true or false, unquoted"),
])
def test_a_bad_schedule_says_what_to_fix(entry, said):
    c = config()
    c['schedule']['step1'] = entry
    with pytest.raises(PublishError, match=said) as e:
        schedule(c)
    assert str(e.value).startswith('course.toml: [schedule] step1') and '\n' not in str(e.value)


def test_a_half_dated_schedule_and_an_unknown_step_are_refused():
    c = config()
    c['schedule']['step3'] = {}
    with pytest.raises(PublishError, match='date every step, or none'):
        schedule(c)
    c = config()
    c['schedule']['step9'] = {}
    with pytest.raises(PublishError, match='step9, not a step'):
        schedule(c)


def test_now_without_a_timezone_is_refused(capsys):
    assert 'no timezone' in run_main(capsys, '--now', '2027-02-01T12:00:00', '--out', '/nonexistent/never-written')


@pytest.mark.parametrize('handin', ['lms', 'hub'])
def test_the_readme_hands_in_as_the_docs_tell_students_with_the_late_rule_of_nbgrader_config(tmp_path, handin):
    """The README's "Handing in" is the docs section that tells students (docs/lms.md's For students, or
    docs/publishing.md's For students on the hub), as it is, and not the other one; then the late rule that
    nbgrader_config.py sets ('zero')."""
    c = config()
    c['publish'] = {**c['publish'], 'handin': handin, 'handin_url': 'https://lms.example.edu/course/7'}
    publish(tmp_path, MID_NOW, config=c)
    section = (tmp_path / 'README.md').read_text().split('## Handing in\n')[1].split('\n## ')[0]
    other = next(h for h in STUDENT_TEXT if h != handin)
    assert student_text(handin) in section and student_text(other) not in section, section
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


def test_a_future_now_is_refused_unless_written_elsewhere(tmp_path):
    """NOW=next month without OUT would put steps not yet open into the folder pushed to students."""
    later = datetime.now(timezone.utc) + timedelta(days=30)
    with pytest.raises(PublishError, match='later than the clock'):
        publish(None, later, config=MID)
    publish(tmp_path, later, config=MID)


def test_anything_still_naming_this_repository_is_refused(tmp_path, monkeypatch):
    """A mention of this repository that relinking did not point at the student repository (a link to its front page,
    say) stops publishing, naming the file."""
    import course.authoring.publish as P

    c = settings(ROOT)
    monkeypatch.setattr(P, 'local_requirements', lambda root: f'# from https://github.com/{c["github"]}\n')
    with pytest.raises(PublishError, match=r'^requirements.txt would name this repository'):
        publish(tmp_path, MID_NOW, config=MID)
    assert not any(tmp_path.iterdir())


def test_a_handin_url_that_is_no_address_is_refused(tmp_path):
    c = config()
    c['publish'] = {**c['publish'], 'handin_url': 'the usual place'}
    with pytest.raises(PublishError, match=r"^course.toml: \[publish\] handin_url is 'the usual place'"):
        publish(tmp_path, MID_NOW, config=c)
    assert not any(tmp_path.iterdir())


def test_the_published_notebooks_are_the_releases_and_solutions_with_student_links(tmp_path):
    """Only links change: every cell of a published notebook is its release's (a published solution: its executed
    solution's, outputs included), with this repository's name and folders replaced by the student repository's. So the
    Colab runs of release/ and notebooks/ (tests/test_colab_runtime.py) run what students get."""
    c = settings(ROOT)

    def student(text, step, name):
        return (text.replace(c['github'], c['publish']['github']).replace('/release/', '/')
                .replace(f'/notebooks/{name}', f'/{step}/solution/{name}'))

    publish(tmp_path, MID_NOW, config=config(dated=False))
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


def test_a_schedule_that_is_no_table_and_a_course_toml_that_is_no_toml_are_refused(tmp_path, capsys, monkeypatch):
    with pytest.raises(PublishError, match=r'^course.toml: schedule should be a table'):
        schedule({**MID, 'schedule': 3})
    import course.authoring.publish as P

    broken = tmp_path / 'course.toml'
    broken.write_text('[publish\n')
    monkeypatch.setattr(P, 'settings', lambda root: tomllib.loads(broken.read_text()))
    message = run_main(capsys, '--now', MID_NOW.isoformat(), '--out', str(tmp_path / 'out'))
    assert message.startswith('error: course.toml: ') and '\n' not in message, message
