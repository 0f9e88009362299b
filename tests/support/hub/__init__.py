"""What the tests of tests/hub/ (make test-hub) share: Unix users, the exchange and PostgreSQL (hubkit), the class's
round trip through the exchange (classloop), JupyterHub in a machine of its own (machine, hubserver) or on this host
(hosthub)."""
