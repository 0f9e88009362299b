"""The class: who hands in where, and the records kept of it. The gradebook on SQLite or PostgreSQL (gradebook),
nbgrader's exchange with the owner check its collect lacks (exchange_collect), an LMS's bulk download and the files that
go back to it (lms, collect)."""
