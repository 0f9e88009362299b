"""Grading: the command (grade) and its orchestration of nbgrader's autograde over a class (grading), the
preprocessors it adds (preprocessors), the probe run in the student's kernel and the claims that judge its record
(probe, claims), repairing what a student broke in a notebook's structure (repair), the live progress line (progress),
the kill matrix of each step's bank (killmatrix), and the benchmark against plain nbgrader (benchmark)."""
