"""The core: the maths of attention and the models the series trains.

Attention and its arguments, hook points, RoPE, the blocks, every model class a lesson trains,
the KV cache, online softmax, the interventions and measures that test a heatmap, the one
training loop and the one generation loop. Nothing here knows a lesson's task: the lessons,
the pre-trained models and the views import the core; the core imports only `plumbing`.
"""
