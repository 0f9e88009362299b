"""Authoring: from the one nbgrader source of each step to what students and CI get. The release and the executed
solution (build), the steps a later step reproduces (reproduced), the Colab badges and Colab's package profile (colab),
Tiny Shakespeare checked by its sha256 (data), the student repository by the release schedule (publish), and the demo
class made from each step's bank of mistakes and alternatives (demo)."""
