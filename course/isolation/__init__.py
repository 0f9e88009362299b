"""Isolation: where a student's code runs. Each submission's kernel runs in a bubblewrap sandbox (sandbox) under
the limits of the policy (policy: stdlib-only, shared with the sandboxed server), in a cgroup of its own where the
machine allows (cgroups); warm kernels come from a server that imports the heavy modules once and forks a kernel per
submission (warm, and warm_server, which runs inside the sandbox).

Kept free of imports beyond the standard library's: the warm server's sandbox holds only course/__init__.py, this file,
policy.py and warm_server.py.
"""
