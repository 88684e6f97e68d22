"""Classroom tooling around the lessons: the notebook runner (`make run`, `make notebooks`), the
slides and site builder (`make slides`, `make html`) and the student-edition builder
(`make student`).

Only this package imports nbclient, nbconvert, nbformat, jupytext and jinja2; the lesson modules
in `attnlab` never import it, so a student's `import attnlab` stays light.
"""
