"""The course's settings: course.toml, read, typed and checked in one place. No other module reads the file.

Every setting is declared once below, with its type, its default and its description (the way nbgrader's traitlets carry
`help=`): load() reads course.toml, checks every value, and returns a Settings. A bad value (a date without a timezone, a
step in the schedule with no source, a due date before its release, an unknown key, a value of the wrong type) stops
the command with one line naming the file, the key, what is wrong and what to write instead (SettingsError).

  python -m course.settings              every setting: its key, its value here, and what it does
  python -m course.settings --publish    only check what make publish needs (run first by make publish)
"""

import argparse
import re
import sys
import tomllib
import types
import typing
from dataclasses import dataclass, field, fields
from datetime import date, datetime, timezone
from functools import cache
from pathlib import Path

from course.layout import ROOT, SETTINGS, steps

FILE = SETTINGS
# The student repository that course.toml ships with: a name to replace, never one to publish to (make publish refuses it).
PLACEHOLDER_STUDENT_REPOSITORY = 'build-a-transformer/course-students'
REQUIRED = object()  # a setting with no default: course.toml must give it


class SettingsError(SystemExit):
    """A bad value in course.toml: one line naming the file and the key, what is wrong, and what to write. A SystemExit, so
    that any command stops with that line (`error: ...`) and no traceback; str() is the line without `error: `."""

    def __init__(self, message):
        super().__init__(f'error: {message}')
        self.message = message

    def __str__(self):
        return self.message


def setting(default, help, check=None):
    """A field of a settings table: its default (REQUIRED: none), what it does, and check(value) -> the problem with a
    value (a phrase that says what to write instead), or None."""
    return field(default=None if default is REQUIRED else default,
                 metadata={'help': help, 'check': check, 'required': default is REQUIRED})


def _repository(value):
    if not re.fullmatch(r'[\w.-]+/[\w.-]+', value):
        return 'name a GitHub repository as owner/name'
    return None


def _branch(value):
    return None if re.fullmatch(r'[\w./-]+', value) else 'name a git branch (main, say)'


def _address(value):
    return None if re.fullmatch(r'https?://[^\s<>]+', value) else 'give a full address, https://...'


def _sha256(value):
    return None if re.fullmatch(r'[0-9a-f]{64}', value) else 'give the 64 hexadecimal digits of a sha256'


def _gradebook_url(value):
    if value.startswith(('sqlite:///', 'postgresql://', 'postgres://', 'postgresql+psycopg://')):
        return None
    return ('the gradebook is SQLite (leave the key out) or PostgreSQL: write postgresql://user@host/database '
            '(docs/gradebook.md)')


def _folder(value):
    return None if value and not Path(value).is_absolute() and '..' not in Path(value).parts else (
        'name a folder inside the course (student, say)')


def _one_of(*choices):
    return lambda value: None if value in choices else f'say {" or ".join(repr(c) for c in choices)}'


@dataclass(frozen=True)
class Data:
    """[data]: Tiny Shakespeare, which make data copies (DATA=path) or downloads, then checks."""

    url: str = setting(REQUIRED, 'where make data downloads Tiny Shakespeare from (without DATA=path)', _address)
    sha256: str = setting(REQUIRED, 'its sha256: make data, and every notebook\'s data cell, refuse any other file',
                          _sha256)


@dataclass(frozen=True)
class Publish:
    """[publish]: the student repository that make publish writes (course/authoring/publish.py, docs/publishing.md)."""

    github: str = setting(PLACEHOLDER_STUDENT_REPOSITORY,
                          'the student repository, owner/name on GitHub: every Colab badge and link make publish writes '
                          '(Step 6\'s checkpoint URL) names it; make publish refuses the placeholder', _repository)
    branch: str = setting('main', 'the branch of the student repository that its links name', _branch)
    folder: str = setting('student', 'the folder, inside this one and gitignored, where make publish writes it (its own '
                          'git repository)', _folder)
    handin: str = setting('lms', 'how students hand in: "lms" (from Colab, an upload to the LMS) or "hub" (nbgrader\'s '
                          'Assignments tab on the course\'s JupyterHub); the student README says so', _one_of('lms', 'hub'))
    handin_url: str | None = setting(None, 'where students hand in (an address the student README links)', _address)
    files_url: str | None = setting(None, 'where students download the files a step ships beside its notebook (a '
                                    'trained checkpoint, a results file) instead of the student repository\'s raw '
                                    'address, which a private repository refuses them: the folder of a release of a public '
                                    'repository, say https://github.com/<owner>/<name>/releases/download/<tag>/, with each '
                                    'file uploaded there under its own name', _address)
    lms: str = setting('Canvas', 'the LMS the course hands in through, as students know it (Canvas, Moodle, ...): the '
                       'student README names it')
    hidden_tests: bool = setting(False, 'true: a published solution (schedule: solution = true) keeps its hidden tests '
                                 'and the rubrics of its written answers. false (the default) takes them out, so that '
                                 'they stay secret for the next class')


@dataclass(frozen=True)
class Dates:
    """One step's line of [schedule]: when it is released and due (aware datetimes, or None for a self-paced step), and
    whether its executed solution is published once it is past due."""

    release: datetime | None = setting(None, 'when the step is released: an ISO 8601 date-time with a timezone')
    due: datetime | None = setting(None, 'when it is due (after its release): an ISO 8601 date-time with a timezone')
    solution: bool = setting(False, 'true: its executed solution is published once the step is past due')

    @property
    def due_utc(self):
        """The due date as nbgrader's gradebook keeps it: UTC without an offset (None if there is none)."""
        return self.due.astimezone(timezone.utc).replace(tzinfo=None) if self.due else None


@dataclass(frozen=True)
class Lti:
    """[lti]: the LMS's registration of the course as an LTI 1.3 tool (docs/lti.md): a class whose students launch the
    course from Canvas or Moodle, and whose roster and scores go back by LTI Advantage (make roster, make passback)."""

    issuer: str | None = setting(None, 'the platform\'s issuer (iss), as its registration of the tool shows it')
    client_id: str | None = setting(None, 'the client id the platform gave the tool')
    deployment_id: str | None = setting(None, 'the deployment id of the tool in the platform')
    auth_login_url: str | None = setting(None, 'the platform\'s OIDC authorisation endpoint', _address)
    auth_token_url: str | None = setting(None, 'the platform\'s OAuth 2 token endpoint', _address)
    auth_audience: str | None = setting(None, 'the audience of the tool\'s token request, where the platform asks for '
                                        'one other than auth_token_url')
    key_set_url: str | None = setting(None, 'the platform\'s public keys (JWKS)', _address)
    lineitems: str | None = setting(None, 'the LMS course\'s line items endpoint (AGS): the hub logs it at each '
                                    'Instructor launch', _address)
    memberships: str | None = setting(None, 'the LMS course\'s memberships endpoint (NRPS): the hub logs it at each '
                                      'Instructor launch', _address)
    private_key: str = setting('lms/lti-tool-key.pem', 'the tool\'s private key, inside the course (make lti-key writes '
                               'it; lms/ is never committed)', _folder)


@dataclass(frozen=True)
class Settings:
    """course.toml, checked: the top-level keys, [data], [publish], and [schedule] as {step: Dates}."""

    github: str = setting(REQUIRED, 'this repository, owner/name on GitHub: every Colab badge and every link to a file '
                          'of it (Step 6\'s checkpoint URL) names it; after changing it, run make build', _repository)
    branch: str = setting('main', 'the branch of this repository that those links name', _branch)
    gradebook_url: str | None = setting(None, 'the gradebook: SQLite (gradebook.db beside nbgrader_config.py) unless '
                                        'set; a PostgreSQL database for several graders at once, '
                                        'postgresql://user@host/database (COURSE_GRADEBOOK_URL in the environment wins '
                                        'over it; docs/gradebook.md)', _gradebook_url)
    data: Data = field(default_factory=Data)
    publish: Publish = field(default_factory=Publish)
    schedule: dict = field(default_factory=dict)  # {step: Dates}, in the order course.toml gives them
    lti: Lti | None = None  # [lti], for a class that goes through an LMS by LTI 1.3; None without the table
    file: Path = None  # the course.toml read (None: built from a mapping)

    def where(self, key):
        """How an error names a key: 'course.toml: [publish] github'."""
        return f'{shown(self.file)}: {key}'

    def student_repository(self):
        """[publish] github, once it names a repository of its own: make publish refuses the placeholder the course ships
        with, and this repository."""
        repo = self.publish.github
        if repo == PLACEHOLDER_STUDENT_REPOSITORY:
            raise SettingsError(f'{self.where("[publish] github")} is {repo}, the placeholder the course ships with: set '
                                'it to your student repository (owner/name on GitHub, created empty) before make publish')
        if repo == self.github:
            raise SettingsError(f'{self.where("[publish] github")} is {repo}, this repository\'s own github setting: the '
                                'student repository must be another one (this one holds the solutions)')
        return repo


def shown(file):
    """A course.toml's path as an error names it: relative to the current folder when inside it."""
    if file is None:
        return FILE
    file = Path(file)
    try:
        return str(file.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(file)


def when(value, where):
    """value (a TOML offset date-time, or an ISO 8601 string) as an aware datetime; where names it in the error. A date
    without a time, or a date-time without a timezone, is refused."""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            raise SettingsError(f'{where}: {value!r} is not an ISO 8601 date-time: write it as '
                                '2027-01-11T09:00:00+00:00') from None
    if isinstance(value, date) and not isinstance(value, datetime):
        raise SettingsError(f'{where}: {value} has no time and timezone: write it as {value}T09:00:00+00:00 (say)')
    if not isinstance(value, datetime):
        raise SettingsError(f'{where}: {value!r} is not a date-time: write it as 2027-01-11T09:00:00+00:00')
    if value.tzinfo is None:
        raise SettingsError(f'{where}: {value.isoformat()} has no timezone: add one, as in 2027-01-11T09:00:00+00:00')
    return value


def _kind(hint):
    """(the types a value may have, how to write one) for a field's type."""
    allowed = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
    allowed = tuple(t for t in allowed if t is not type(None))
    if bool in allowed:
        return allowed, 'true or false, unquoted'
    if datetime in allowed:
        return allowed, 'a date-time with a timezone'
    return allowed, 'text in quotes'


def _table(cls, given, where, extra_keys=()):
    """An instance of the settings table cls from given (a dict from course.toml), every key known and every value
    checked; where(key) names a key in an error."""
    declared = {f.name: f for f in fields(cls) if 'help' in f.metadata}
    unknown = sorted(set(given) - set(declared) - set(extra_keys))
    if unknown:
        raise SettingsError(f'{where(unknown[0])} is not a setting here: the keys are {", ".join(declared)} '
                            '(python -m course.settings describes each)')
    hints = typing.get_type_hints(cls)
    values = {}
    for name, f in declared.items():
        if name not in given:
            if f.metadata['required']:
                raise SettingsError(f'{where(name)} is missing: add it ({f.metadata["help"]})')
            continue
        value = given[name]
        allowed, how = _kind(hints[name])
        if datetime in allowed:
            value = when(value, where(name))
        elif not isinstance(value, allowed) or (bool not in allowed and isinstance(value, bool)):
            raise SettingsError(f'{where(name)} is {value!r}: write {how}')
        check = f.metadata['check']
        problem = check(value) if check and isinstance(value, str) else None
        if problem:
            raise SettingsError(f'{where(name)} is {value!r}: {problem}')
        values[name] = value
    return cls(**values)


def parse(given, root=ROOT, file=None):
    """Settings from course.toml as parsed (a dict), checked; file: the course.toml it came from, for the errors."""
    label = shown(file)

    def top(key):
        return f'{label}: {key}'

    def section(name):
        return lambda key: f'{label}: [{name}] {key}'.rstrip()

    tables = {'data': Data, 'publish': Publish}
    for name in (*tables, 'schedule', 'lti'):
        if not isinstance(given.get(name, {}), dict):
            raise SettingsError(f'{label}: {name} should be a table, [{name}], with a line per setting')
    settings = _table(Settings, given, top, extra_keys=(*tables, 'schedule', 'lti'))
    parts = {name: _table(cls, given.get(name, {}), section(name)) for name, cls in tables.items()}
    if 'lti' in given:
        parts['lti'] = _table(Lti, given['lti'], section('lti'))
    table = given.get('schedule', {})
    known = steps(root) if table and (Path(root) / 'source').is_dir() else []
    schedule = {}
    for step, entry in table.items():
        where = f'{label}: [schedule] {step}'
        if step not in known:
            raise SettingsError(f'{where}: there is no step {step} in source/ (steps: {", ".join(known) or "none"}): '
                                'remove its line or restore source/' + step)
        if not isinstance(entry, dict):
            raise SettingsError(f'{where} should be a table: {{ release = ..., due = ..., solution = ... }}')
        extra = sorted(set(entry) - {'release', 'due', 'solution'})
        if extra:
            raise SettingsError(f'{where} has {", ".join(extra)}: only release, due and solution')
        dates = _table(Dates, entry, lambda key, where=where: f'{where} {key}')
        if (dates.release is None) != (dates.due is None):
            raise SettingsError(f'{where}: give both release and due (or neither, for a self-paced course)')
        if dates.release and dates.due <= dates.release:
            raise SettingsError(f'{where}: due ({dates.due.isoformat()}) is not after release '
                                f'({dates.release.isoformat()}): move one of them')
        schedule[step] = dates
    return Settings(**{f.name: getattr(settings, f.name) for f in fields(Settings)
                       if f.name not in ('data', 'publish', 'schedule', 'lti', 'file')},
                    **parts, schedule=types.MappingProxyType(schedule), file=file)


@cache
def _loaded(root, text):
    file = Path(root) / FILE
    try:
        given = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise SettingsError(f'{shown(file)}: {e}: fix it (TOML: key = value, text in quotes)') from None
    return parse(given, root, file)


def load(root=ROOT):
    """The course's settings: root/course.toml, read and checked (once per version of the file)."""
    file = Path(root) / FILE
    try:
        text = file.read_text()
    except FileNotFoundError:
        raise SettingsError(f'{shown(file)}: no such file: the course\'s settings are kept there (restore it from git)') \
            from None
    return _loaded(str(Path(root)), text)  # read again whenever the file's text changes


def describe(settings):
    """Lines: every setting's key, its value in settings, and its description."""
    lines = []

    def table(obj, prefix):
        for f in fields(obj):
            if 'help' not in f.metadata:
                continue
            value = getattr(obj, f.name)
            lines.append(f'{prefix}{f.name} = {value.isoformat() if isinstance(value, datetime) else value!r}')
            lines.append(f'    {f.metadata["help"]}')

    table(settings, '')
    table(settings.data, '[data] ')
    table(settings.publish, '[publish] ')
    table(settings.lti or Lti(), '[lti] ')  # without the table, its defaults: a class with no LMS launch
    lines.append('[schedule] <step> = { release = ..., due = ..., solution = ... }: one line per step of source/; none '
                 'dated: a self-paced course')
    for f in fields(Dates):
        lines.append(f'    {f.name}: {f.metadata["help"]}')
    for step, dates in settings.schedule.items():
        lines.append(f'  {step}: release {dates.release and dates.release.isoformat()}, due '
                     f'{dates.due and dates.due.isoformat()}, solution {dates.solution}')
    return lines


def main(argv=None):
    ap = argparse.ArgumentParser(prog='python -m course.settings', description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--publish', action='store_true',
                    help='check course.toml for make publish: every value, and a student repository of its own')
    args = ap.parse_args(argv)
    settings = load()
    if args.publish:
        print(f'{shown(settings.file)}: the student repository is {settings.student_repository()}')
        return
    print(f'{shown(settings.file)}, checked:')
    print('\n'.join(describe(settings)))


if __name__ == '__main__':
    sys.exit(main())
