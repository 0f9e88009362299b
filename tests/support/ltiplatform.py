"""A stand-in LMS written to the IMS specifications the course meets it by, on loopback, recording every request it gets:
LTI 1.3 Core (the launch: the third-party-initiated login, the OpenID Connect authorisation endpoint answering with a
signed id_token by form_post), IMS Security Framework 1.0 (a JWKS of the platform's keys, rotating; the token endpoint:
the client-credentials grant with a JWT client assertion, checked against the tool's public key), Assignment and Grade
Services 2.0 (line items, scores) and Names and Role Provisioning Services 2.0 (memberships, paged).

No LMS can be installed on the test machines: this is the platform's side only, everything on the course's side is the
real thing. It also serves a course page (a launch link per person and per step its ?step= names) and a gradebook page,
as an LMS does, for the browser journey. Faults on demand: answer a route with given statuses first (fail()), expire
every access token (expire_tokens()), remove a member from the course (remove()), rotate the signing key (rotate()).

  with StandIn(tool_jwk) as lms:  lms.url, lms.issuer, lms.client_id, lms.deployment_id, lms.requests, lms.scores
"""

import html
import json
import secrets
import threading
import time
import uuid
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlencode, urlparse

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

LTI = 'https://purl.imsglobal.org/spec/lti/claim/'
AGS = 'https://purl.imsglobal.org/spec/lti-ags/'
NRPS = 'https://purl.imsglobal.org/spec/lti-nrps/'
ROLES = {
    'Learner': 'http://purl.imsglobal.org/vocab/lis/v2/membership#Learner',
    'Instructor': 'http://purl.imsglobal.org/vocab/lis/v2/membership#Instructor',
    'TeachingAssistant': 'http://purl.imsglobal.org/vocab/lis/v2/membership/Instructor#TeachingAssistant',
    'Mentor': 'http://purl.imsglobal.org/vocab/lis/v2/membership#Mentor',
    'Administrator': 'http://purl.imsglobal.org/vocab/lis/v2/institution/person#Administrator',
}
ACTIVITY = {'Initialized', 'Started', 'InProgress', 'Submitted', 'Completed'}
GRADING = {'FullyGraded', 'Pending', 'PendingManual', 'Failed', 'NotReady'}
SCORE_TYPE = 'application/vnd.ims.lis.v1.score+json'


def new_key():
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return {'kid': uuid.uuid4().hex, 'private': key,
            'jwk': {**json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key())), 'alg': 'RS256', 'use': 'sig'}}


def pem(key):
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()


class StandIn:
    """The platform, started on a free loopback port by __enter__ (a thread), stopped by __exit__."""

    def __init__(self, tool_jwk=None, client_id='stand-in-client-7', deployment_id='deployment-1', context='course-1',
                 token_ttl=3600, page_size=50):
        self.tool_jwk, self.client_id, self.deployment_id, self.context = tool_jwk, client_id, deployment_id, context
        self.token_ttl, self.page_size = token_ttl, page_size
        self.keys = [new_key()]  # the current signing key first; the previous one stays in the JWKS after rotate()
        self.tool_login_url = self.tool_redirect = self.tool_target = None  # the tool's registration (register())
        self.members = {}  # user_id: member (NRPS)
        self.lineitems = {}  # id (URL): line item
        self.scores = {}  # (lineitem id, user_id): the score in force
        self.accepted = []  # every score accepted, in order: (lineitem id, user_id, score)
        self.requests = []  # (method, path, status) of every request
        self.tokens = {}  # access token: (scopes, expiry)
        self.assertions = set()  # jti of every client assertion seen
        self.faults = {}  # route name: [status, ...] to answer first
        self.expire_after = None  # expire every access token once this many more scores are accepted
        self.nonces = {}  # login state the authorisation endpoint issued id_tokens for
        self.lock = threading.Lock()

    # -- set-up --------------------------------------------------------------------------------------------------------
    def __enter__(self):
        self.server = ThreadingHTTPServer(('127.0.0.1', 0), self.handler())
        self.server.daemon_threads = True
        self.url = f'http://127.0.0.1:{self.server.server_address[1]}'
        self.issuer = self.url
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()

    def register(self, login_url, redirect_uri, target_link_uri):
        """The tool as an administrator registers it: its OIDC login initiation URL, its redirect (launch) URI."""
        self.tool_login_url, self.tool_redirect, self.tool_target = login_url, redirect_uri, target_link_uri

    def enrol(self, user_id, given, family, role='Learner', email=None):
        self.members[user_id] = {'user_id': user_id, 'given_name': given, 'family_name': family, 'status': 'Active',
                                 'name': f'{given} {family}', 'roles': [ROLES[role]],
                                 **({'email': email} if email else {})}

    def remove(self, user_id):
        """The student leaves the course: gone from the memberships; their scores refused from now on (422)."""
        self.members.pop(user_id)

    def settings(self):
        """The [lti] table of course.toml for this platform."""
        return {'issuer': self.issuer, 'client_id': self.client_id, 'deployment_id': self.deployment_id,
                'auth_login_url': f'{self.url}/auth', 'auth_token_url': f'{self.url}/token',
                'key_set_url': f'{self.url}/jwks', 'lineitems': f'{self.url}/courses/{self.context}/lineitems',
                'memberships': f'{self.url}/courses/{self.context}/memberships'}

    def rotate(self):
        """A new signing key; the previous one stays published until the next rotation, as key rollover asks."""
        self.keys = [new_key(), self.keys[0]]

    def fail(self, route, *statuses):
        """Answer the next requests to route ('token', 'scores', 'lineitems', 'memberships') with statuses, in turn."""
        self.faults.setdefault(route, []).extend(statuses)

    def expire_tokens_after(self, scores):
        """Every access token expires once scores more scores are accepted: a token expiring in the middle of a run."""
        self.expire_after = scores

    def expire_tokens(self):
        """Every access token issued so far expires now (as a token outliving its expires_in does)."""
        with self.lock:
            self.tokens = {t: (scopes, 0) for t, (scopes, _) in self.tokens.items()}

    # -- the launch ----------------------------------------------------------------------------------------------------
    def launch_url(self, user_id, step, how='link', **token):
        """Where a person's click on the course page goes: the third-party-initiated login for step. how: 'link' (the
        step in the resource link's target_link_uri) or 'custom' (a custom parameter step=). token: what the id_token
        should be, for the refusals (signer='foreign', aud=, deployment=, exp=, roles=, tamper_roles=)."""
        return f'{self.url}/launch?' + urlencode({'user': user_id, 'step': step, 'how': how, 'token': json.dumps(token)})

    def id_token(self, user_id, step, nonce, how='link', signer=None, aud=None, deployment=None, exp=None, roles=None,
                 tamper_roles=None):
        member = self.members[user_id]
        now = int(time.time())
        target = f'{self.tool_target}?step={step}' if how == 'link' else self.tool_target
        claims = {
            'iss': self.issuer, 'aud': aud or self.client_id, 'sub': user_id, 'iat': now, 'nonce': nonce,
            'exp': now + 300 if exp is None else exp, 'azp': aud or self.client_id,
            'name': member['name'], 'given_name': member['given_name'], 'family_name': member['family_name'],
            **({'email': member['email']} if 'email' in member else {}),
            LTI + 'message_type': 'LtiResourceLinkRequest', LTI + 'version': '1.3.0',
            LTI + 'deployment_id': deployment or self.deployment_id, LTI + 'target_link_uri': target,
            LTI + 'resource_link': {'id': f'link-{step}', 'title': step},
            LTI + 'roles': [ROLES.get(r, r) for r in roles] if roles is not None else member['roles'],
            LTI + 'context': {'id': self.context, 'label': 'TFS', 'title': 'Build a transformer from scratch'},
            **({LTI + 'custom': {'step': step}} if how == 'custom' else {}),
            AGS + 'claim/endpoint': {'scope': [AGS + 'scope/lineitem', AGS + 'scope/score'],
                                     'lineitems': f'{self.url}/courses/{self.context}/lineitems'},
            NRPS + 'claim/namesroleservice': {'context_memberships_url': f'{self.url}/courses/{self.context}/memberships',
                                              'service_versions': ['2.0']},
        }
        key = new_key() if signer == 'foreign' else self.keys[0]
        token = jwt.encode(claims, key['private'], algorithm='RS256', headers={'kid': self.keys[0]['kid']})
        if tamper_roles is not None:  # the payload changed after signing: the signature no longer covers it
            header, _, signature = token.split('.')
            claims[LTI + 'roles'] = [ROLES.get(r, r) for r in tamper_roles]
            body = jwt.utils.base64url_encode(json.dumps(claims).encode()).decode()
            token = f'{header}.{body}.{signature}'
        return token

    # -- the services --------------------------------------------------------------------------------------------------
    def issue_token(self, form):
        """The token endpoint (IMS Security Framework 4.1): a client-credentials grant whose client assertion is a JWT the
        tool signed (iss = sub = client_id, aud = this endpoint, unexpired, jti never seen). (status, body)."""
        if form.get('grant_type') != 'client_credentials' or form.get('client_assertion_type') != \
                'urn:ietf:params:oauth:client-assertion-type:jwt-bearer':
            return 400, {'error': 'unsupported_grant_type'}
        try:
            key = jwt.algorithms.RSAAlgorithm.from_jwk(json.dumps(self.tool_jwk))
            claims = jwt.decode(form.get('client_assertion', ''), key, algorithms=['RS256'],
                                audience=f'{self.url}/token', options={'require': ['exp', 'iat', 'jti']})
        except jwt.PyJWTError as e:
            return 401, {'error': 'invalid_client', 'error_description': str(e)}
        if claims.get('iss') != self.client_id or claims.get('sub') != self.client_id:
            return 401, {'error': 'invalid_client', 'error_description': 'iss and sub must be the client id'}
        with self.lock:
            if claims['jti'] in self.assertions:
                return 401, {'error': 'invalid_client', 'error_description': 'client assertion replayed'}
            self.assertions.add(claims['jti'])
            token = secrets.token_urlsafe(24)
            scopes = set(form.get('scope', '').split())
            self.tokens[token] = (scopes, time.time() + self.token_ttl)
        return 200, {'access_token': token, 'token_type': 'Bearer', 'expires_in': self.token_ttl,
                     'scope': ' '.join(sorted(scopes))}

    def authorised(self, headers, scope):
        auth = headers.get('Authorization', '')
        scopes, expiry = self.tokens.get(auth.removeprefix('Bearer '), (set(), 0))
        return auth.startswith('Bearer ') and expiry > time.time() and scope in scopes

    def post_score(self, item_id, body):
        """AGS 2.0 Score publish: validated as the specification asks; a score older than the one in force is ignored."""
        try:
            score = json.loads(body)
            stamp = datetime.fromisoformat(score['timestamp'].replace('Z', '+00:00'))
        except (ValueError, KeyError, TypeError, AttributeError):
            return 400, {'error': 'a score needs a JSON body with an ISO 8601 timestamp'}
        if stamp.tzinfo is None:
            return 400, {'error': 'timestamp needs its time zone'}
        if score.get('activityProgress') not in ACTIVITY or score.get('gradingProgress') not in GRADING:
            return 400, {'error': 'activityProgress and gradingProgress must be of the specification'}
        if 'scoreGiven' in score and ('scoreMaximum' not in score or not 0 <= score['scoreGiven']):
            return 400, {'error': 'scoreGiven needs scoreMaximum'}
        member = self.members.get(score.get('userId'))
        if member is None or ROLES['Learner'] not in member['roles']:
            return 422, {'error': f'user {score.get("userId")} is not a student of this course'}
        with self.lock:
            key = (item_id, score['userId'])
            before = self.scores.get(key)
            if before is None or datetime.fromisoformat(before['timestamp'].replace('Z', '+00:00')) <= stamp:
                self.scores[key] = score
                self.accepted.append((item_id, score['userId'], score))
            if self.expire_after is not None:
                self.expire_after -= 1
                if self.expire_after <= 0:
                    self.expire_after = None
                    self.tokens = {t: (scopes, 0) for t, (scopes, _) in self.tokens.items()}
        return 200, {}

    def members_page(self, query):
        start = int(query.get('from', ['0'])[0])
        users = sorted(self.members.values(), key=lambda m: m['user_id'])
        page = users[start:start + self.page_size]
        more = start + self.page_size < len(users)
        return {'id': f'{self.url}/courses/{self.context}/memberships',
                'context': {'id': self.context, 'label': 'TFS', 'title': 'Build a transformer from scratch'},
                'members': page}, (f'{self.url}/courses/{self.context}/memberships?from={start + self.page_size}'
                                   if more else None)

    # -- the pages -----------------------------------------------------------------------------------------------------
    def course_page(self, steps):
        rows = ''.join(f'<li><a id="launch-{html.escape(u)}-{html.escape(s)}" href="{html.escape(self.launch_url(u, s))}">'
                       f'{html.escape(s)}: open as {html.escape(m["name"])}</a></li>'
                       for s in steps for u, m in sorted(self.members.items()))
        return f'<!doctype html><title>Course</title><h1>Build a transformer from scratch</h1><ul>{rows}</ul>'

    def gradebook_page(self):
        names = {u: m['name'] for u, m in self.members.items()}
        labels = {i: it.get('resourceId') or it.get('label') for i, it in self.lineitems.items()}
        rows = ''.join(f'<tr><td class="student">{html.escape(names.get(u, u))}</td><td class="item">'
                       f'{html.escape(labels.get(i, i))}</td><td class="score">{s.get("scoreGiven", "")}'
                       f'</td><td class="max">{s.get("scoreMaximum", "")}</td><td class="progress">'
                       f'{html.escape(s["gradingProgress"])}</td></tr>'
                       for (i, u), s in sorted(self.scores.items()))
        return (f'<!doctype html><title>Gradebook</title><h1>Gradebook</h1><table id="gradebook"><tr><th>Student</th>'
                f'<th>Item</th><th>Score</th><th>Out of</th><th>Grading</th></tr>{rows}</table>')

    def handler(self):
        lms = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = 'HTTP/1.1'  # connections kept open between requests, as a real platform's are

            def log_message(self, *args):
                pass

            def send(self, status, body=b'', kind='application/json', headers=()):
                data = body if isinstance(body, bytes) else (body.encode() if isinstance(body, str)
                                                              else json.dumps(body).encode())
                with lms.lock:
                    lms.requests.append((self.command, self.path, status))
                self.send_response(status)
                self.send_header('Content-Type', kind)
                self.send_header('Content-Length', str(len(data)))
                for k, v in headers:
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def fault(self, route):
                with lms.lock:
                    queue = lms.faults.get(route)
                    status = queue.pop(0) if queue else None
                if status:
                    self.send(status, {'error': f'stand-in fault {status}'})
                return status

            def form(self):
                length = int(self.headers.get('Content-Length') or 0)
                raw = self.rfile.read(length).decode()
                return raw, {k: v[0] for k, v in parse_qs(raw).items()}

            def do_GET(self):
                self.route('GET')

            def do_POST(self):
                self.route('POST')

            def route(self, method):
                url = urlparse(self.path)
                query = parse_qs(url.query)
                parts = url.path.strip('/').split('/')
                raw, form = self.form() if method == 'POST' else ('', {})
                if url.path == '/jwks':
                    return self.send(200, {'keys': [{**k['jwk'], 'kid': k['kid']} for k in lms.keys]})
                if url.path == '/course':
                    return self.send(200, lms.course_page(query.get('step', [])), 'text/html')
                if url.path == '/gradebook':
                    return self.send(200, lms.gradebook_page(), 'text/html')
                if url.path == '/launch':
                    return self.login(query)
                if url.path == '/auth':
                    return self.authorise({**{k: v[0] for k, v in query.items()}, **form})
                if url.path == '/token' and method == 'POST':
                    if self.fault('token'):
                        return
                    return self.send(*lms.issue_token(form))
                if parts[:1] == ['courses'] and len(parts) >= 3 and parts[1] == lms.context:
                    return self.service(method, parts[2:], query, raw)
                return self.send(404, {'error': 'no such endpoint'})

            def login(self, query):
                """Third-party-initiated login (LTI 1.3 Core 4.1 and Security 5.1.1.1): to the tool's login URL."""
                user, step, how = query['user'][0], query['step'][0], query.get('how', ['link'])[0]
                hint = json.dumps({'step': step, 'how': how, 'token': json.loads(query.get('token', ['{}'])[0])})
                target = f'{lms.tool_target}?step={step}' if how == 'link' else lms.tool_target
                args = {'iss': lms.issuer, 'login_hint': user, 'target_link_uri': target, 'lti_message_hint': hint,
                        'client_id': lms.client_id, 'lti_deployment_id': lms.deployment_id}
                return self.send(302, b'', headers=[('Location', f'{lms.tool_login_url}?{urlencode(args)}')])

            def authorise(self, args):
                """The OIDC authorisation endpoint: checks the request as Security 5.1.1.2 says, answers with the
                id_token and state POSTed to the registered redirect URI (form_post)."""
                wanted = {'scope': 'openid', 'response_type': 'id_token', 'response_mode': 'form_post', 'prompt': 'none'}
                wrong = [k for k, v in wanted.items() if args.get(k) != v]
                if wrong or args.get('client_id') != lms.client_id or args.get('redirect_uri') != lms.tool_redirect \
                        or not args.get('nonce') or args.get('login_hint') not in lms.members:
                    return self.send(400, {'error': 'invalid_request', 'wrong': wrong or 'client, redirect, nonce or user'})
                hint = json.loads(args.get('lti_message_hint') or '{}')
                token = lms.id_token(args['login_hint'], hint['step'], args['nonce'], hint.get('how', 'link'),
                                     **hint.get('token', {}))
                page = (f'<!doctype html><title>Launching</title><form id="launch" method="post" '
                        f'action="{html.escape(lms.tool_redirect)}"><input type="hidden" name="id_token" '
                        f'value="{html.escape(token)}"><input type="hidden" name="state" value="'
                        f'{html.escape(args.get("state", ""))}"></form><script>document.getElementById("launch")'
                        '.submit()</script>')
                return self.send(200, page, 'text/html')

            def service(self, method, rest, query, raw):
                if rest == ['memberships'] and method == 'GET':
                    if self.fault('memberships'):
                        return
                    if not lms.authorised(self.headers, NRPS + 'scope/contextmembership.readonly'):
                        return self.send(401, {'error': 'invalid or expired token'})
                    body, following = lms.members_page(query)
                    links = [('Link', f'<{following}>; rel="next"')] if following else []
                    return self.send(200, body, 'application/vnd.ims.lti-nrps.v2.membershipcontainer+json', links)
                if rest[:1] != ['lineitems']:
                    return self.send(404, {'error': 'no such service'})
                scope = AGS + ('scope/score' if rest[-1:] == ['scores'] else 'scope/lineitem')
                if self.fault('scores' if rest[-1:] == ['scores'] else 'lineitems'):
                    return
                if not lms.authorised(self.headers, scope):
                    return self.send(401, {'error': 'invalid or expired token'})
                base = f'{lms.url}/courses/{lms.context}/lineitems'
                if rest == ['lineitems'] and method == 'GET':
                    return self.send(200, list(lms.lineitems.values()),
                                     'application/vnd.ims.lis.v2.lineitemcontainer+json')
                if rest == ['lineitems'] and method == 'POST':
                    item = json.loads(raw)
                    if not item.get('label') or not item.get('scoreMaximum'):
                        return self.send(400, {'error': 'a line item needs label and scoreMaximum'})
                    with lms.lock:
                        item['id'] = f'{base}/{len(lms.lineitems) + 1}'
                        lms.lineitems[item['id']] = item
                    return self.send(201, item, 'application/vnd.ims.lis.v2.lineitem+json')
                item_id = f'{base}/{rest[1]}' if len(rest) > 1 else None
                if item_id not in lms.lineitems:
                    return self.send(404, {'error': 'no such line item'})
                if len(rest) == 2 and method == 'GET':
                    return self.send(200, lms.lineitems[item_id], 'application/vnd.ims.lis.v2.lineitem+json')
                if len(rest) == 3 and rest[2] == 'scores' and method == 'POST':
                    if self.headers.get('Content-Type', '').split(';')[0] != SCORE_TYPE:
                        return self.send(415, {'error': f'scores are {SCORE_TYPE}'})
                    return self.send(*lms.post_score(item_id, raw))
                return self.send(405, {'error': 'not allowed'})

        return Handler
