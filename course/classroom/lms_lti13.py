"""Any LMS by LTI 1.3 Advantage (docs/lti.md): students launch the course's JupyterHub from the LMS (hub/lti_config.py),
and the grades and the roster flow back through the LMS's own services, by pylti1p3:

  roster      Names and Role Provisioning Services: every Learner of the LMS course into the gradebook (id, names, the
              email where the LMS shares it, the LTI user id as lms_user_id); one who left is marked dropped in the
              gradebook's lti_roster table, never deleted with their grades.
  passback    Assignment and Grade Services: each student's score of each step to that step's line item (found by its
              resourceId, the step, or made), with activityProgress, gradingProgress (PendingManual while written answers
              await a grader) and the graded submission's time. The gradebook's lti_ledger table records what was
              posted: a run posts only what changed since; a failure is retried, then reported, and never recorded.

The settings are course.toml's [lti] table, read here only (settings()). The tool's key pair: new_key() (make lti-key).
A student's id in the course (their hub account, their folder, their gradebook row) is student_id(issuer, sub): derived
from the LMS's stable `sub`, never from a name or email, which change. hub/lti_config.py derives the same.
"""

import hashlib
import json
import time
from datetime import datetime, timezone
from pathlib import Path

from course.classroom.lms import ROOT, Platform, Refused

PLATFORM_KEYS = ('issuer', 'client_id', 'deployment_id', 'auth_login_url', 'auth_token_url', 'key_set_url')
SERVICE_KEYS = ('lineitems', 'memberships', 'private_key')
SCOPES = {
    'lineitem': 'https://purl.imsglobal.org/spec/lti-ags/scope/lineitem',
    'score': 'https://purl.imsglobal.org/spec/lti-ags/scope/score',
    'members': 'https://purl.imsglobal.org/spec/lti-nrps/scope/contextmembership.readonly',
}
LEARNER = 'http://purl.imsglobal.org/vocab/lis/v2/membership#Learner'


def student_id(issuer, sub):
    """The course's id of the LMS user sub of the platform issuer: 'lti-' and 16 hex digits of their hash (a Unix
    account name: lowercase, under 32 characters). hub/lti_config.py's username() is the same function."""
    return 'lti-' + hashlib.sha256(f'{issuer}\n{sub}'.encode()).hexdigest()[:16]


def settings(root=ROOT, need=PLATFORM_KEYS + SERVICE_KEYS):
    """course.toml's [lti] table (course.settings.Lti) as a dict, with private_key made absolute; Refused, naming the
    key, when one of need is missing."""
    from dataclasses import asdict

    from course.settings import Lti, load

    cfg = load(root)
    table = asdict(cfg.lti or Lti())  # no [lti]: its defaults (the key's place), and every key of a platform missing
    missing = [k for k in need if not str(table.get(k) or '').strip()]
    if missing:
        raise Refused(f'{cfg.where("[lti]")} has no {", ".join(missing)}: set them as the LMS registered the tool '
                      '(docs/lti.md)')
    table['private_key'] = str(Path(root) / table['private_key'])
    return table


def configured(root=ROOT):
    """Whether course.toml has an [lti] table: the class goes through an LMS by LTI 1.3."""
    from course.settings import load

    return load(root).lti is not None


def public_jwk(private_pem):
    """The tool's public key as a JWK (RS256, use sig, kid its RFC 7638 thumbprint): what the LMS registration holds."""
    from jwcrypto.jwk import JWK

    key = JWK.from_pem(private_pem.encode())
    jwk = json.loads(key.export_public())
    return {**jwk, 'alg': 'RS256', 'use': 'sig', 'kid': key.thumbprint()}


def new_key(root=ROOT, force=False):
    """Make the tool's RSA key pair at [lti] private_key (mode 0600), unless one is there (or force); its public JWK."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    path = Path(settings(root, need=()).get('private_key'))
    if not path.exists() or force:
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch(mode=0o600)
        path.chmod(0o600)
        path.write_bytes(pem)
    return public_jwk(path.read_text())


def public_pem(root=ROOT):
    """The tool's public key in PEM (what Moodle's "RSA key" field takes)."""
    from cryptography.hazmat.primitives import serialization

    key = serialization.load_pem_private_key(Path(settings(root, need=())['private_key']).read_bytes(), password=None)
    return key.public_key().public_bytes(serialization.Encoding.PEM,
                                         serialization.PublicFormat.SubjectPublicKeyInfo).decode().strip()


class Failed(Exception):
    """A service call that failed for good (after its retries): str() says what and how."""


class Services:
    """pylti1p3's Assignment and Grade and Names and Roles services for the [lti] settings, with the retries they lack:
    a network error, 429 or 5xx is tried again (attempts in all, waiting backoff seconds, doubling); a 401 (the access
    token expired or was revoked) once more with a new token; any other answer fails at once."""

    def __init__(self, cfg, attempts=4, backoff=0.5, timeout=30):
        self.cfg, self.attempts, self.backoff, self.timeout = cfg, attempts, backoff, timeout
        try:
            self.private_key = Path(cfg['private_key']).read_text()
        except OSError as e:
            raise Refused(f'{cfg["private_key"]}: the tool\'s private key cannot be read ({e.strerror}): make lti-key '
                          'makes one (docs/lti.md)') from None
        self.kid = public_jwk(self.private_key)['kid']
        self.requests = 0
        self.fresh()

    def fresh(self):
        """New connector, so a new access token at the next call (pylti1p3 keeps one per connector and scopes)."""
        import requests
        from pylti1p3.assignments_grades import AssignmentsGradesService
        from pylti1p3.names_roles import NamesRolesProvisioningService
        from pylti1p3.registration import Registration
        from pylti1p3.service_connector import ServiceConnector

        kid = self.kid

        class Tool(Registration):
            def get_kid(self):  # pylti1p3 derives none from a PEM: the JWK's thumbprint, as the LMS holds it
                return kid

        registration = (Tool().set_issuer(self.cfg['issuer']).set_client_id(self.cfg['client_id'])
                        .set_auth_token_url(self.cfg['auth_token_url']).set_tool_private_key(self.private_key))
        if self.cfg.get('auth_audience'):
            registration.set_auth_audience(self.cfg['auth_audience'])
        session = requests.Session()
        session.headers['User-Agent'] = 'transformer-course-lti (pylti1p3)'
        timeout, services = self.timeout, self
        send = session.request

        def request(method, url, **kw):  # every call bounded in time, and counted
            services.requests += 1
            return send(method, url, **{'timeout': timeout, **kw})

        session.request = request
        connector = ServiceConnector(registration, requests_session=session)
        self.ags = AssignmentsGradesService(connector, {'scope': [SCOPES['lineitem'], SCOPES['score']],
                                                        'lineitems': self.cfg['lineitems']})
        self.nrps = NamesRolesProvisioningService(connector, {'context_memberships_url': self.cfg['memberships']})

    def call(self, what, fn):
        """fn(self) with the retries; Failed(what, why) when they run out or the platform refuses."""
        import requests
        from pylti1p3.exception import LtiException, LtiServiceException

        wait, renewed, why = self.backoff, False, ''
        for attempt in range(self.attempts):
            try:
                return fn(self)
            except LtiServiceException as e:
                status = e.response.status_code
                why = f'the platform answered {status} {e.response.reason}: {e.response.text[:200]}'
                if status == 401 and not renewed:
                    renewed = True
                    self.fresh()
                    continue
                if status != 429 and status < 500:
                    raise Failed(f'{what}: {why}') from None
            except requests.RequestException as e:
                why = f'no answer from the platform ({type(e).__name__}: {str(e)[:200]})'
            except LtiException as e:
                raise Failed(f'{what}: {e}') from None
            if attempt + 1 < self.attempts:
                time.sleep(wait)
                wait *= 2
        raise Failed(f'{what}: {why} ({self.attempts} tries)')


# The gradebook's two tables of the LTI class (beside nbgrader's, in the same database: SQLite or PostgreSQL).
def tables(gradebook):
    """(lti_roster, lti_ledger) as SQLAlchemy tables, created in the gradebook's database when missing."""
    import sqlalchemy as sa

    meta = sa.MetaData()
    roster = sa.Table('lti_roster', meta,
                      sa.Column('student_id', sa.String(128), primary_key=True),
                      sa.Column('user_id', sa.String(255), nullable=False),
                      sa.Column('status', sa.String(16), nullable=False),  # active, dropped
                      sa.Column('changed_at', sa.String(40), nullable=False))
    ledger = sa.Table('lti_ledger', meta,
                      sa.Column('step', sa.String(128), primary_key=True),
                      sa.Column('student_id', sa.String(128), primary_key=True),
                      sa.Column('user_id', sa.String(255), nullable=False),
                      sa.Column('lineitem', sa.Text, nullable=False),
                      sa.Column('score_given', sa.Float, nullable=False),
                      sa.Column('score_maximum', sa.Float, nullable=False),
                      sa.Column('activity_progress', sa.String(32), nullable=False),
                      sa.Column('grading_progress', sa.String(32), nullable=False),
                      sa.Column('timestamp', sa.String(40), nullable=False),
                      sa.Column('posted_at', sa.String(40), nullable=False))
    meta.create_all(gradebook.db.get_bind())
    if gradebook.db.get_bind().dialect.name == 'sqlite':
        # each accepted score is committed as it comes (a run stopped half way loses no record), without waiting for the
        # disk each time: write-ahead logging (as grading sets it) survives the process dying; a power cut may lose the
        # last records, and the next run then posts those scores again, which the LMS takes as the same result
        gradebook.db.execute(sa.text('pragma journal_mode=wal'))
        gradebook.db.execute(sa.text('pragma synchronous=normal'))
    return roster, ledger


def utc_now():
    return datetime.now(timezone.utc).isoformat(timespec='seconds')


def upsert(gradebook, table, key, values):
    """Replace the row of table whose primary key is key (a dict) by key | values, in one transaction."""
    import sqlalchemy as sa

    where = sa.and_(*(table.c[k] == v for k, v in key.items()))
    db = gradebook.db
    db.execute(sa.delete(table).where(where))
    db.execute(sa.insert(table).values(**key, **values))
    db.commit()


def read(gradebook, table):
    import sqlalchemy as sa

    return [dict(r._mapping) for r in gradebook.db.execute(sa.select(table))]


def is_learner(member):
    return any(r == LEARNER or r.rsplit('#', 1)[-1] == 'Learner' or r == 'Learner' for r in member.get('roles', []))


def sync_roster(gradebook, services, issuer):
    """The LMS course's Learners (NRPS) into the gradebook: each, by student_id(issuer, user_id), created or updated
    (names, the email where shared, lms_user_id); each LTI student of the gradebook who is no longer an active Learner
    (an LMS id in the gradebook) marked dropped in lti_roster (their grades stay). Returns the report lines."""
    roster, _ = tables(gradebook)
    members = services.call('the roster (NRPS memberships)', lambda s: s.nrps.get_members())
    known = {r['student_id']: r for r in read(gradebook, roster)}
    active, lines = set(), []
    for m in members:
        if not is_learner(m) or not m.get('user_id'):
            continue
        sid = student_id(issuer, m['user_id'])
        if m.get('status', 'Active') != 'Active':
            continue
        first = m.get('given_name') or ''
        last = m.get('family_name') or ('' if first else m.get('name', ''))
        gradebook.update_or_create_student(sid, first_name=first, last_name=last, email=m.get('email') or None,
                                           lms_user_id=m['user_id'])
        active.add(sid)
        if known.get(sid, {}).get('status') != 'active':
            upsert(gradebook, roster, {'student_id': sid}, {'user_id': m['user_id'], 'status': 'active',
                                                            'changed_at': utc_now()})
            lines.append(f'roster: {sid} ({first} {last}) ' + ('back in the course' if sid in known else 'added'))
    for s in gradebook.students:  # every student the LMS gave an id, whether or not a roster run saw them before
        if s.lms_user_id and s.id not in known:
            known[s.id] = {'user_id': s.lms_user_id, 'status': 'unknown'}
    for sid, r in sorted(known.items()):
        if sid not in active and r['status'] != 'dropped':
            upsert(gradebook, roster, {'student_id': sid}, {'user_id': r['user_id'], 'status': 'dropped',
                                                            'changed_at': utc_now()})
            lines.append(f'roster: {sid} dropped (no longer an active Learner of the LMS course; their grades are kept)')
    lines.append(f'roster: {len(active)} active students from {services.cfg["memberships"]}')
    return lines


def dropped(gradebook):
    roster, _ = tables(gradebook)
    return {r['student_id'] for r in read(gradebook, roster) if r['status'] == 'dropped'}


def score_of(row):
    """The AGS score of an export row (course.reports.export.rows()) with a submission: what the ledger compares."""
    stamp = row['timestamp']
    if isinstance(stamp, str):
        stamp = datetime.fromisoformat(stamp)
    stamp = (stamp if stamp.tzinfo else stamp.replace(tzinfo=timezone.utc)).astimezone(timezone.utc)
    return {'score_given': round(float(row['score']), 6), 'score_maximum': round(float(row['max_score']), 6),
            'activity_progress': 'Submitted',
            'grading_progress': 'PendingManual' if row['needs_manual_grading'] else 'FullyGraded',
            'timestamp': stamp.isoformat(timespec='milliseconds')}


def lineitem_for(services, step, maximum, label):
    """The line item of step in the LMS course: the one whose resourceId is the step, else a new one (label, maximum)."""
    from pylti1p3.lineitem import LineItem

    wanted = LineItem().set_resource_id(step).set_label(label).set_score_maximum(maximum).set_tag('transformer-course')
    return services.call(f'{step}: its line item', lambda s: s.ags.find_or_create_lineitem(wanted, find_by='resource_id'))


def passback(gradebook, table, services, issuer, only_steps=None):
    """Post each submitted step's score (table: course.reports.export.rows()) that differs from what lti_ledger says was
    posted; record each post that the platform accepted. Returns (report lines, number failed)."""
    from pylti1p3.grade import Grade

    _, ledger = tables(gradebook)
    posted = {(r['step'], r['student_id']): r for r in read(gradebook, ledger)}
    gone = dropped(gradebook)
    people = {s.id: s for s in gradebook.students}
    lines, counts, failed = [], {'posted': 0, 'unchanged': 0}, 0
    for step in dict.fromkeys(r['step'] for r in table):
        if only_steps and step not in only_steps:
            continue
        rows = [r for r in table if r['step'] == step and r['submitted']]
        for r in [r for r in rows if not r['timestamp']]:
            lines.append(f'not posted: {r["student_id"]} {step}: the submission has no time (nbgrader\'s timestamp.txt)')
        rows = [r for r in rows if r['timestamp']]
        if not rows:
            continue
        try:
            item = lineitem_for(services, step, float(rows[0]['max_score']), step)
        except Failed as e:
            lines.append(f'not posted: {e} (its {len(rows)} scores wait for the next run)')
            failed += len(rows)
            continue
        for row in sorted(rows, key=lambda r: r['student_id']):
            sid = row['student_id']
            user = people[sid].lms_user_id if sid in people else None
            if sid in gone:
                lines.append(f'not posted: {sid} {step}: dropped from the LMS course (make roster says since when)')
                continue
            if not user:
                lines.append(f'not posted: {sid} {step}: no LTI user id in the gradebook (not on the LMS roster: make roster)')
                continue
            want = score_of(row)
            before = posted.get((step, sid))
            if before and before['lineitem'] == item.get_id() and all(before[k] == v for k, v in want.items()):
                counts['unchanged'] += 1
                continue
            grade = (Grade().set_user_id(user).set_score_given(want['score_given'])
                     .set_score_maximum(want['score_maximum']).set_activity_progress(want['activity_progress'])
                     .set_grading_progress(want['grading_progress']).set_timestamp(want['timestamp']))
            try:
                services.call(f'{sid} {step}', lambda s, g=grade, i=item: s.ags.put_grade(g, i))
            except Failed as e:
                lines.append(f'not posted: {e}')
                failed += 1
                continue
            upsert(gradebook, ledger, {'step': step, 'student_id': sid},
                   {'user_id': user, 'lineitem': item.get_id(), **want, 'posted_at': utc_now()})
            counts['posted'] += 1
            lines.append(f'posted: {sid} {step}: {want["score_given"]:g}/{want["score_maximum"]:g} '
                         f'({want["grading_progress"]})')
    lines.append(f'passback: {counts["posted"]} posted, {counts["unchanged"]} unchanged since the last run, {failed} failed'
                 + (' (run make passback again: what failed was not recorded)' if failed else ''))
    return lines, failed


class Lti13(Platform):
    key, name = 'lti13', 'LTI 1.3'
    by_services = True

    def configured(self, root=ROOT):
        return configured(root)

    def used(self, gradebook, root=ROOT):
        return configured(root)

    def upload_hint(self, root=ROOT):
        if not configured(root):
            return []
        return ['  nothing to upload: make passback posts the scores to the LMS by LTI Advantage (docs/lti.md)']


PLATFORM = Lti13()
