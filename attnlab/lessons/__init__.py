"""The lessons: what serves one notebook.

The synthetic tasks and their data (reviews, digit sequences, repeated tokens, odd-one-out
sets), and each lesson's trainers and measurements; their recipes, numbers only, are in the
core. A lesson module may import the core, the pre-trained models and `plumbing`; only the
views, the exercises and the classroom tooling import a lesson.
"""
