"""The class report, reports/index.html: what the class got wrong, step by step, on one self-contained page.

  make grade                                         writes it after grading (course.grader.grade)
  make report (python -m course.reports.classreport)   rebuilds it, after manual grading say, without re-grading

Per step: the score distribution; each autograded test cell's pass rate and discrimination (the correlation of its score
with the rest of the step's score, the corrected item-total correlation), flagged when nobody passes it, everybody does,
or the correlation is negative; the most frequent failure messages of each cell, grouped (numbers normalised); the status
and time of each submission; the written answers awaiting a grader. Then the pairs of students whose solution code is
alike (copydetect's winnowing, with the release and the reference solution as boilerplate): leads for a human to check.

Built from the gradebook (nbgrader's Gradebook API: scores, answers awaiting a grader) and results/<step>/<student>.json
(status, seconds, each failed test cell's message, course.reports.results); the similarity alone reads the solution cells of
autograded/<student>/<step>/. Student text is hostile: every string reaches the page through Jinja2's autoescaping, the
page has no script and its Content-Security-Policy allows none, and the figures (PNGs inlined as data: URIs, drawn by
matplotlib's Agg) carry no student text.
"""

import argparse
import base64
import datetime
import hashlib
import io
import json
import os
import re
import statistics
from itertools import combinations
from pathlib import Path

from course.cells import MARKER, STUB_ERROR, STUB_MESSAGE, role
from course.classroom import gradebook
from course.layout import REPORTS, ROOT, autograded_path, autograded_points, is_demo, notebooks

OUT = Path(REPORTS) / 'index.html'
MESSAGES_SHOWN = 5  # failure message groups listed per cell
SIMILARITY = 0.5  # a pair is listed when this share of one student's own code (not the release's) is in the other's
MIN_OVERLAP = 40  # ... and they share at least this many characters of tokenised code
PAIRS_SHOWN = 30  # per step
MAX_NOTEBOOK_BYTES = 20_000_000  # an autograded notebook larger than this is left out of the similarity
MAX_CODE_CHARS = 50_000  # of a student's solution cells, compared and shown
STUB_FAILURE = f'NotImplementedError: {STUB_MESSAGE}'
NO_MESSAGE = 'no error recorded: the cell did not run (the notebook stopped before it), or its grading predates this report'
# Counted as taking part: the submissions that were autograded and are not blank (a blank one is counted, not analysed).
TOOK_PART = ('graded', 'timeout', 'kernel died')

HEX = re.compile(r'\b0x[0-9a-fA-F]+\b')
NUMBER = re.compile(r'(?<![\w.])[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?(?![\w])')
NUMBERS = re.compile(r'\[[\[\]#,.\s]*#[\[\]#,.\s]*\]')  # a list or array of numbers, once they are #


def normalise(message):
    """The group of a failure message: each number (and address) becomes #, a list of numbers [#], whitespace one space;
    so that 'took the softmax over dim 0, got 0.98' and '... dim 1, got 0.97' fall in one group."""
    text = NUMBER.sub('#', HEX.sub('#', message))
    return re.sub(r'\s+', ' ', NUMBERS.sub('[#]', text)).strip()[:500]


def correlation(xs, ys):
    """Pearson's r of two equal-length sequences, or None when either does not vary (or fewer than 3 values)."""
    if len(xs) < 3 or len(set(xs)) < 2 or len(set(ys)) < 2:
        return None
    return statistics.correlation(xs, ys)


def load(root=ROOT):
    """{step: [submission dicts]} for every step of the gradebook, each dict a row of course.reports.export.rows(): with its
    record (results/) and its written answers awaiting a grader, [(notebook, grade_id)]."""
    from nbgrader.api import Gradebook

    from course.reports.export import rows

    db_url = gradebook.configured(root)
    if gradebook.missing(db_url):
        raise SystemExit(f'error: {gradebook.missing(db_url)}')
    out = {}
    with Gradebook(db_url) as gb:
        for row in rows(gb, root):
            out.setdefault(row['step'], []).append(row)
    return out


def took_part(row):
    record = row['record']
    return bool(record and record.get('graded') and record.get('status') in TOOK_PART)


def cell_table(subs, points):
    """One dict per autograded test cell: its points, pass rate (full points), mean, discrimination, flags, and the groups
    of its failure messages. subs: the submissions that took part."""
    totals = [s['autograded'] for s in subs]
    out = []
    for gid, pts in points.items():
        scores = [s['cells'].get(gid, 0.0) for s in subs]
        n = len(subs)
        passed = sum(x >= pts for x in scores)
        r = correlation(scores, [t - x for t, x in zip(totals, scores, strict=True)])
        flags = []
        if n and passed == 0:
            flags.append('nobody passes')
        if n and passed == n:
            flags.append('everybody passes')
        if r is not None and r < 0:
            flags.append('negative discrimination')
        failed = [s for s, x in zip(subs, scores, strict=True) if x < pts]
        out.append({'grade_id': gid, 'points': pts, 'n': n, 'passed': passed, 'pass_rate': passed / n if n else None,
                    'mean': sum(scores) / n if n else None, 'discrimination': r, 'flags': flags,
                    **failure_groups(gid, failed, n)})
    return out


def failure_groups(gid, failed, n):
    """The failures of one cell: 'stub' (students who left the function's stub), 'groups' (the rest, grouped by
    normalise(), most frequent first: pattern, count, share of n, an example, the students), and 'more' (groups not
    shown)."""
    stub, groups = [], {}
    for s in failed:
        message = (s['record'].get('failures') or {}).get(gid) or NO_MESSAGE
        if message == STUB_FAILURE or STUB_ERROR in message:  # the stub raised, in the kernel or in a grader's check
            stub.append(s['student_id'])
            continue
        g = groups.setdefault(normalise(message), {'examples': {}, 'students': []})
        g['examples'][message] = g['examples'].get(message, 0) + 1
        g['students'].append(s['student_id'])
    ranked = sorted(groups.items(), key=lambda kv: (-len(kv[1]['students']), kv[0]))
    shown = [{'pattern': pattern.replace('#', '…'), 'key': pattern, 'count': len(g['students']),
              'share': len(g['students']) / n, 'example': max(g['examples'], key=g['examples'].get),
              'students': sorted(g['students'])} for pattern, g in ranked[:MESSAGES_SHOWN]]
    return {'stub': sorted(stub), 'groups': shown, 'more': len(ranked) - len(shown)}


# --- figures: matplotlib's Agg, inlined PNGs; only numbers and the instructor's grade ids are drawn, never student text ---

def png(fig, alt):
    buf = io.BytesIO()
    fig.savefig(buf, format='png', dpi=96, bbox_inches='tight')
    return {'data': base64.b64encode(buf.getvalue()).decode('ascii'), 'alt': alt}


def figure(width, height):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height))
    return fig, fig.add_subplot()


def score_histogram(step, subs):
    scores = [s['score'] for s in subs]
    top = max((s['max_score'] for s in subs), default=0) or 1
    fig, ax = figure(6.4, 3.2)
    bins = [i - 0.5 for i in range(int(top) + 2)] if top <= 60 else 20
    ax.hist(scores, bins=bins, range=None if top <= 60 else (0, top), color='#4878a8', edgecolor='white')
    ax.set(title=f'{step}: score distribution ({len(scores)} submissions)',
           xlabel=f'score (points out of {top:g}; written answers count once graded)',
           ylabel='submissions', xlim=(-0.5, top + 0.5))
    ax.yaxis.get_major_locator().set_params(integer=True)
    if scores:
        alt = (f'Histogram of the scores of the {len(scores)} {step} submissions that took part, out of {top:g} points: '
               f'median {statistics.median(scores):g}, lowest {min(scores):g}, highest {max(scores):g}; '
               f'{sum(x >= top for x in scores)} with every point, {sum(x == 0 for x in scores)} with none.')
    else:
        alt = f'An empty histogram: no {step} submission took part.'
    return png(fig, alt)


BROKEN = ('nobody passes', 'negative discrimination')  # flags that more likely mean a broken test or lesson
COLOURS = {'broken': '#c44e52', 'easy': '#dd8452', 'fine': '#4878a8'}


def kind(cell):
    return 'broken' if set(cell['flags']) & set(BROKEN) else 'easy' if cell['flags'] else 'fine'


def pass_rate_chart(step, cells):
    from matplotlib.patches import Patch

    fig, ax = figure(6.4, 1.6 + 0.26 * len(cells))
    ax.barh([c['grade_id'] for c in cells][::-1], [100 * (c['pass_rate'] or 0) for c in cells][::-1],
            color=[COLOURS[kind(c)] for c in cells][::-1])
    ax.set(title=f'{step}: pass rate of each graded cell', xlabel='submissions with full points (%)',
           ylabel='graded test cell', xlim=(0, 100))
    ax.tick_params(axis='y', labelsize=8)
    ax.legend(handles=[Patch(color=COLOURS['broken'], label='nobody passes, or negative discrimination'),
                       Patch(color=COLOURS['easy'], label='everybody passes'), Patch(color=COLOURS['fine'], label='not flagged')],
              loc='upper center', bbox_to_anchor=(0.5, -0.5 / (1 + 0.16 * len(cells))), ncol=2, fontsize=8, frameon=False)
    flagged = [f"{c['grade_id']} ({', '.join(c['flags'])})" for c in cells if c['flags']]
    low = min(cells, key=lambda c: c['pass_rate'] or 0) if cells else None
    alt = (f'Horizontal bar chart of the pass rate of each of the {len(cells)} graded test cells of {step}'
           + (f"; lowest: {low['grade_id']} at {100 * (low['pass_rate'] or 0):.0f}%" if low else '')
           + (f"; flagged: {'; '.join(flagged)}." if flagged else '; none flagged.'))
    return png(fig, alt)


def seconds(row):
    """Seconds the grading of a submission took (autograde and feedback; until it was stopped), or None."""
    s = (row['record'] or {}).get('seconds') or {}
    if 'stopped_after' in s:
        return s['stopped_after']
    if 'autograde' in s:
        return s['autograde'] + s.get('feedback', 0)
    return None


def time_histogram(step, rows):
    times = [t for t in map(seconds, rows) if t is not None]
    fig, ax = figure(6.4, 2.8)
    ax.hist(times, bins=20, color='#55a868', edgecolor='white')
    ax.set(title=f'{step}: grading time per submission', xlabel='seconds (autograde and feedback)', ylabel='submissions')
    ax.yaxis.get_major_locator().set_params(integer=True)
    alt = (f'Histogram of the grading time of {len(times)} {step} submissions: median {statistics.median(times):.1f} s, '
           f'longest {max(times):.1f} s.' if times else f'An empty histogram: no {step} submission has a grading time.')
    return png(fig, alt)


# --- similarity: copydetect's winnowing on each student's solution cells, the release and the reference as boilerplate ---

def code_cells(path, roles):
    """The sources of the cells of a notebook with one of roles ('any': every code cell), solution markers taken out.
    Read as JSON: every notebook read here nbgrader wrote or read already, and nbformat's validation would cost seven
    times the reading (most of the report's time, on a large class)."""
    cells = json.loads(Path(path).read_text(encoding='utf-8'))['cells']
    return [MARKER.sub('', c['source'] if isinstance(c['source'], str) else ''.join(c['source'])) for c in cells
            if c.get('cell_type') == 'code' and ('any' in roles or role(c) in roles)]


def solution_code(step, student, root=ROOT, given=frozenset()):
    """The student's solution cells of a step, as graded (autograded/), but those left as given (a source in given: the
    stub, the reference solution), cut to MAX_CODE_CHARS; None if unreadable."""
    parts = []
    for name in notebooks(step, root):
        path = autograded_path(student, step, root) / name
        if not path.is_file() or path.is_symlink() or path.stat().st_size > MAX_NOTEBOOK_BYTES:
            return None
        try:
            parts += [code for code in code_cells(path, ('solution',)) if code.strip() not in given]
        except Exception:  # noqa: BLE001 -- a notebook that is not JSON, or has no cells: nothing to compare
            return None
    return '\n\n'.join(parts)[:MAX_CODE_CHARS]


def boilerplate(step, root=ROOT):
    """What no pair is counted for sharing: every code cell of the release (stubs, given code, visible tests) and of the
    source (the reference solution: a correct answer is expected to resemble it), and the solution cells of each joined as
    solution_code() joins a student's (so that the seams between untouched cells are boilerplate too)."""
    parts = []
    for folder in ('release', 'source'):
        solutions = []
        for name in notebooks(step, root):
            if (Path(root) / folder / step / name).is_file():
                parts += code_cells(Path(root) / folder / step / name, ('any',))
                solutions += code_cells(Path(root) / folder / step / name, ('solution',))
        parts.append('\n\n'.join(solutions))
    return '\n\n'.join(parts)


def similar_pairs(step, students, root=ROOT, threshold=SIMILARITY):
    """(pairs, compared): the pairs of students whose solution code is alike, most alike first. Each pair: the two
    students, the share of each one's own code found in the other's, the characters of tokenised code they share, and
    each one's code as segments [(text, shared)]."""
    os.environ.setdefault('MPLBACKEND', 'Agg')  # copydetect imports pyplot
    from copydetect import CodeFingerprint, compare_files, defaults
    from copydetect.utils import get_token_coverage

    k = defaults.NOISE_THRESHOLD
    window = defaults.GUARANTEE_THRESHOLD - defaults.NOISE_THRESHOLD + 1
    common = CodeFingerprint('boilerplate.py', k, 1, language='python', fp=io.StringIO(boilerplate(step, root))).hashes
    # A solution cell left as released, or written as the reference, is all boilerplate: not tokenised (pygments is most
    # of the cost, about 0.1 s for a step's cells), nor shown.
    given = {code.strip() for folder in ('release', 'source') for name in notebooks(step, root)
             if (Path(root) / folder / step / name).is_file()
             for code in code_cells(Path(root) / folder / step / name, ('solution',))}
    prints, seen = {}, {}
    for student in students:
        code = solution_code(step, student, root, given)
        if code and code in seen:  # the same code (copied whole, or left as given but for a cell): fingerprinted once
            prints[student] = seen[code]
        elif code:
            fp = CodeFingerprint('solution.py', k, window, language='python', fp=io.StringIO(code))
            # The boilerplate taken out here, not by CodeFingerprint(boilerplate=...): copydetect 0.5.0 gives numpy's
            # intersect1d its hashes with assume_unique=True although they repeat (a line written twice), which drops
            # hashes that are not boilerplate and keeps some that are.
            fp.hash_idx = {h: idx for h, idx in fp.hash_idx.items() if h not in common}
            fp.hashes = set(fp.hash_idx)
            fp.token_coverage = get_token_coverage(fp.hash_idx, k, len(fp.filtered_code))
            prints[student] = seen[code] = fp
    pairs = []
    for a, b in combinations(sorted(prints), 2):
        if prints[a].hashes.isdisjoint(prints[b].hashes):  # most pairs of a class: a set look-up, not a comparison
            continue
        overlap, (sa, sb), (slices_a, slices_b) = compare_files(prints[a], prints[b])
        if overlap >= MIN_OVERLAP and max(sa, sb) >= threshold:
            pairs.append({'students': (a, b), 'similarity': (float(sa), float(sb)), 'overlap': int(overlap),
                          'code': (segments(prints[a].raw_code, slices_a), segments(prints[b].raw_code, slices_b))})
    pairs.sort(key=lambda p: (-max(p['similarity']), -p['overlap'], p['students']))
    return pairs, len(prints)


def segments(code, slices):
    """code as [(text, shared)]: the parts in slices (copydetect's [starts, ends]) marked shared."""
    out, at = [], 0
    for start, end in sorted(zip(map(int, slices[0]), map(int, slices[1]), strict=True)):
        start = max(start, at)
        if start > at:
            out.append((code[at:start], False))
        if end > start:
            out.append((code[start:end], True))
        at = max(at, end)
    if at < len(code):
        out.append((code[at:], False))
    return out


# --- the page ---

def awaiting(rows):
    """The written answers awaiting a grader: [{'notebook', 'grade_id', 'students'}], one per answer cell."""
    cells = {}
    for r in rows:
        for nb, gid in r['awaiting']:
            cells.setdefault((nb, gid), []).append(r['student_id'])
    return [{'notebook': nb, 'grade_id': gid, 'count': len(students), 'students': sorted(students)}
            for (nb, gid), students in cells.items()]


def step_section(step, rows, root=ROOT, threshold=SIMILARITY):
    points = autograded_points(step, root) if (Path(root) / 'source' / step).is_dir() else {}
    submitted = [r for r in rows if r['record'] is not None or r['status'] != 'not submitted']
    subs = [r for r in submitted if took_part(r)]
    cells = cell_table(subs, points)
    statuses = {}
    for r in rows:
        statuses[r['status'].split(' (')[0]] = statuses.get(r['status'].split(' (')[0], 0) + 1
    times = [t for t in map(seconds, submitted) if t is not None]
    pairs, compared = similar_pairs(step, [r['student_id'] for r in subs], root, threshold)
    return {
        'step': step, 'students': len(rows), 'submitted': len(submitted), 'n': len(subs), 'statuses': statuses,
        'cells': cells, 'flagged': [c for c in cells if c['flags']],
        'flag_counts': {f: sum(f in c['flags'] for c in cells) for f in ('nobody passes', 'negative discrimination',
                                                                          'everybody passes')},
        'max_score': max((r['max_score'] for r in rows), default=0),
        'median': statistics.median([r['score'] for r in subs]) if subs else None,
        'median_seconds': statistics.median(times) if times else None, 'max_seconds': max(times, default=None),
        'submissions': sorted(({'student': r['student_id'], 'status': r['status'], 'kernel': r['kernel'],
                                'seconds': seconds(r), 'score': r['score'], 'max_score': r['max_score'],
                                'autograded': r['autograded'], 'autograded_max': r['autograded_max']} for r in submitted),
                              key=lambda s: (-(s['seconds'] or 0), s['student'])),
        'awaiting': awaiting(rows),
        'figures': [score_histogram(step, subs), pass_rate_chart(step, cells), time_histogram(step, submitted)]
        if subs else [],
        'pairs': pairs[:PAIRS_SHOWN], 'pairs_more': max(0, len(pairs) - PAIRS_SHOWN), 'compared': compared,
    }


CSS = """
body { font: 15px/1.45 system-ui, sans-serif; margin: 0 auto; max-width: 72rem; padding: 1rem 2rem; color: #222; }
h1, h2, h3 { line-height: 1.2; } h2 { border-top: 2px solid #ccc; padding-top: 1rem; margin-top: 2.5rem; }
table { border-collapse: collapse; margin: .5rem 0 1rem; } th, td { padding: .2rem .6rem; text-align: left;
vertical-align: top; border-bottom: 1px solid #ddd; } td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
.flag { color: #a1262c; font-weight: 600; } .note { color: #555; } figure { margin: 1rem 0; } img { max-width: 100%; }
code, pre { font: 13px/1.35 ui-monospace, monospace; } pre { white-space: pre-wrap; word-break: break-word; margin: .3rem 0;
background: #f6f6f6; padding: .4rem; max-height: 24rem; overflow: auto; } mark { background: #ffe08a; }
.pair { display: grid; grid-template-columns: 1fr 1fr; gap: 1rem; } details { margin: .3rem 0 .8rem; }
summary { cursor: pointer; } .group { margin: .2rem 0 .6rem 1rem; } .share { font-weight: 600; }
"""

TEMPLATE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{{ csp }}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Class report</title>
<style>{{ css | safe }}</style>
</head>
<body>
<h1>Class report</h1>
<p class="note">Built {{ built }} from the gradebook and <code>results/</code>: {{ students }} students,
{{ steps | length }} step{{ 's' if steps | length != 1 }}. After grading written answers by hand,
<code>{{ rebuild }}</code> rebuilds it without re-grading. Statistics count the submissions that were
autograded and are not blank.</p>
{% if demo %}<p class="note"><strong>This is the demo class</strong> (<code>make demo</code>): per step, a perfect, a blank
and a late submission, and a few students who each make one typical mistake, in one function. So most cells are passed by
nearly everyone, and <em>everybody passes</em> flags are expected here: they say nothing of the tests, which
<code>make mutants</code> checks against every known mistake. In a real class, that flag is worth a look.</p>{% endif %}
<nav><ul>
{% for s in steps %}<li><a href="#{{ s.step }}">{{ s.step }}</a>: {{ s.n }} of {{ s.students }} students took part,
{{ s.flagged | length }} flagged cell{{ 's' if s.flagged | length != 1 }},
{{ s.awaiting | sum(attribute='count') }} written answer{{ 's' if s.awaiting | sum(attribute='count') != 1 }} awaiting a
grader, {{ s.pairs | length + s.pairs_more }} similar pair{{ 's' if s.pairs | length + s.pairs_more != 1 }}</li>
{% endfor %}</ul></nav>
{% for s in steps %}
<section>
<h2 id="{{ s.step }}">{{ s.step }}</h2>
<p>{{ s.submitted }} submissions of {{ s.students }} students:
{% for status, count in s.statuses | dictsort %}{{ count }} {{ status }}{{ ', ' if not loop.last }}{% endfor %}.
{% if s.median is not none %}Median score {{ '%g' | format(s.median) }} of {{ '%g' | format(s.max_score) }}.{% endif %}
{% if s.median_seconds is not none %}Grading took {{ '%.1f' | format(s.median_seconds) }} s a submission (median),
{{ '%.1f' | format(s.max_seconds) }} s at most.{% endif %}</p>
{% for f in s.figures %}<figure><img src="data:image/png;base64,{{ f.data }}" alt="{{ f.alt }}"></figure>
{% endfor %}
<h3>Graded cells</h3>
{% if s.flagged %}<p><span class="flag">{{ s.flagged | length }} of {{ s.cells | length }} cells flagged:</span>
{% for f, count in s.flag_counts.items() if count %}{{ count }} {{ f }}{{ ', ' if not loop.last }}{% endfor %}.
A cell nobody passes, or that students who do well elsewhere fail (negative discrimination), is often a broken test or a
lesson that did not land; one everybody passes may be a test that cannot fail.</p>{% endif %}
<table>
<tr><th class="num">#</th><th>cell</th><th class="num">points</th><th class="num">pass rate</th><th class="num">mean</th>
<th class="num">discrimination</th><th>flags</th></tr>
{% for c in s.cells %}<tr><td class="num">{{ loop.index }}</td><td><code>{{ c.grade_id }}</code></td>
<td class="num">{{ '%g' | format(c.points) }}</td>
<td class="num">{{ '%.0f%%' | format(100 * c.pass_rate) if c.pass_rate is not none else '—' }}</td>
<td class="num">{{ '%.2f' | format(c.mean) if c.mean is not none else '—' }}</td>
<td class="num">{{ '%+.2f' | format(c.discrimination) if c.discrimination is not none else '—' }}</td>
<td class="flag">{{ c.flags | join(', ') }}</td></tr>
{% endfor %}</table>
<p class="note">Pass rate: the share with full points. Discrimination: the correlation of the cell's score with the rest of
the step's autograded score (— when either does not vary).</p>
<h3>What the class got wrong</h3>
{% for c in s.cells if c.groups or c.stub %}
<div class="failures" id="{{ s.step }}-{{ c.grade_id }}-failures">
<h4><code>{{ c.grade_id }}</code>: {{ c.n - c.passed }} of {{ c.n }} lost points</h4>
{% for g in c.groups %}<div class="group"><span class="share">{{ '%.0f%%' | format(100 * g.share) }} of the class
({{ g.count }} of {{ c.n }})</span>: <code>{{ g.pattern }}</code>
<details><summary>an example, and who</summary><pre>{{ g.example }}</pre><p>{{ g.students | join(', ') }}</p></details></div>
{% endfor %}
{% if c.more %}<p class="note group">and {{ c.more }} other message{{ 's' if c.more != 1 }}</p>{% endif %}
{% if c.stub %}<p class="note group">{{ c.stub | length }} left the function's stub (NotImplementedError):
{{ c.stub | join(', ') }}</p>{% endif %}
</div>
{% else %}<p>No graded cell lost points.</p>
{% endfor %}
<h3>Written answers awaiting a grader</h3>
{% if s.awaiting %}<p>Grade them in nbgrader's formgrader (Manual Grading), then rebuild this page.</p>
<table><tr><th>notebook</th><th>answer cell</th><th class="num">awaiting</th><th>students</th></tr>
{% for a in s.awaiting %}<tr><td>{{ a.notebook }}</td><td><code>{{ a.grade_id }}</code></td>
<td class="num">{{ a.count }}</td><td>{{ a.students | join(', ') }}</td></tr>
{% endfor %}</table>{% else %}<p>None.</p>{% endif %}
<h3>Status and time per submission</h3>
<details><summary>{{ s.submissions | length }} submissions, longest first</summary>
<table><tr><th>student</th><th>status</th><th>kernel</th><th class="num">seconds</th><th class="num">autograded</th>
<th class="num">score</th></tr>
{% for u in s.submissions %}<tr><td>{{ u.student }}</td><td>{{ u.status }}</td><td>{{ u.kernel }}</td>
<td class="num">{{ '%.1f' | format(u.seconds) if u.seconds is not none else '—' }}</td>
<td class="num">{{ '%g/%g' | format(u.autograded, u.autograded_max) }}</td>
<td class="num">{{ '%g/%g' | format(u.score, u.max_score) }}</td></tr>
{% endfor %}</table></details>
</section>
{% endfor %}
<section>
<h2 id="similarity">Similar solutions: leads, not verdicts</h2>
<p>Pairs of students whose solution cells share much code once the release (stubs, given code, visible tests) and the
reference solution are set aside, found by copydetect's winnowing (names and strings are ignored: a renamed copy still
matches). Short exercises leave few ways to be right, and students may work together as allowed: each pair is a lead for a
human to read, never a finding. Listed: at least {{ '%.0f%%' | format(100 * threshold) }} of one student's own code found in
the other's, and at least {{ min_overlap }} characters of tokenised code shared.</p>
{% for s in steps %}
<h3>{{ s.step }}</h3>
{% if s.pairs %}<table><tr><th>students</th><th class="num">share of each one's own code</th><th class="num">shared</th></tr>
{% for p in s.pairs %}<tr><td>{{ p.students[0] }} and {{ p.students[1] }}</td>
<td class="num">{{ '%.0f%%' | format(100 * p.similarity[0]) }} / {{ '%.0f%%' | format(100 * p.similarity[1]) }}</td>
<td class="num">{{ p.overlap }}</td></tr>
<tr><td colspan="3"><details><summary>their solution cells, the shared parts marked</summary><div class="pair">
{% for code in p.code %}<div><p>{{ p.students[loop.index0] }}</p><pre>
{%- for text, shared in code %}{% if shared %}<mark>{{ text }}</mark>{% else %}{{ text }}{% endif %}{% endfor -%}
</pre></div>
{% endfor %}</div></details></td></tr>
{% endfor %}</table>
{% if s.pairs_more %}<p class="note">and {{ s.pairs_more }} more pairs above the threshold.</p>{% endif %}
{% else %}<p>No pair among the {{ s.compared }} solutions that differ from the release and the reference.</p>{% endif %}
{% endfor %}
</section>
</body>
</html>
"""


SECTIONS = Path('.build') / 'classreport'  # each step's section as last built, with what it was built from (its key)


def section_key(step, rows, root=ROOT, threshold=SIMILARITY):
    """What a step's section is built from, hashed: its rows (grades, statuses, records), the threshold, this module's
    code, and the notebooks its similarity reads (each student's autograded ones, the step's source and release: path,
    size, modification time)."""
    root = Path(root)
    files = sorted(autograded_path(root=root).glob(f'*/{step}/*.ipynb')) + sorted((root / 'source' / step).glob('*.ipynb'))
    files += sorted((root / 'release' / step).glob('*.ipynb'))
    stamp = [(str(f.relative_to(root)), f.stat().st_size, f.stat().st_mtime_ns) for f in files if f.is_file()]
    data = json.dumps([step, rows, threshold, Path(__file__).read_text(), stamp], sort_keys=True, default=str)
    return hashlib.sha256(data.encode()).hexdigest()


def cached_section(step, rows, root=ROOT, threshold=SIMILARITY):
    """step_section(), or the one built last time if nothing it is built from changed (section_key()): make grade of one
    step rebuilds that step's section, and reads the others' back (their figures and similarity are most of the cost)."""
    path = Path(root) / SECTIONS / f'{step}.json'
    key = section_key(step, rows, root, threshold)
    try:
        saved = json.loads(path.read_text())
        if saved['key'] == key:
            return saved['section']
    except (OSError, ValueError, KeyError, TypeError):  # none yet, or damaged: built again
        pass
    section = step_section(step, rows, root, threshold)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix('.part')
    tmp.write_text(json.dumps({'key': key, 'section': section}))
    tmp.replace(path)
    return json.loads(json.dumps(section))  # as a cached one reads (lists for tuples): one page either way


def render(table, root=ROOT, threshold=SIMILARITY):
    """The page, as a string, from load()'s table."""
    from jinja2 import Environment, StrictUndefined

    style = base64.b64encode(hashlib.sha256(CSS.encode()).digest()).decode()
    # No script may run, no resource load but the inlined images, the one style block; nothing may submit or re-base.
    csp = f"default-src 'none'; img-src data:; style-src 'sha256-{style}'; base-uri 'none'; form-action 'none'"
    env = Environment(autoescape=True, undefined=StrictUndefined, trim_blocks=False)
    steps = [cached_section(step, rows, root, threshold) for step, rows in table.items()]
    students = len({r['student_id'] for rows in table.values() for r in rows})
    built = datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')
    demo = is_demo(root)
    rebuild = ('cd demo && ../.venv/bin/python -m course.reports.classreport' if demo
               else 'make report (.venv/bin/python -m course.reports.classreport)')
    return env.from_string(TEMPLATE).render(csp=csp, css=CSS, steps=steps, students=students, built=built,
                                            threshold=threshold, min_overlap=MIN_OVERLAP, demo=demo, rebuild=rebuild)


def write(root=ROOT, out=None, threshold=SIMILARITY):
    """Build the report of the course at root into out (default root/reports/index.html); return its path."""
    out = Path(out) if out else Path(root) / OUT
    html = render(load(root), root, threshold)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix('.part')
    tmp.write_text(html, encoding='utf-8')
    tmp.replace(out)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(prog='python -m course.reports.classreport', description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--out', help=f'where to write the page (default: {OUT})')
    ap.add_argument('--similarity', type=float, default=SIMILARITY,
                    help='list a pair when this share of one student\'s own code is in the other\'s (default %(default)s)')
    args = ap.parse_args(argv)
    print(f'wrote {write(out=args.out, threshold=args.similarity)}')


if __name__ == '__main__':
    main()
