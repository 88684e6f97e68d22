"""The pre-trained models: loading weights someone else trained.

SmolLM2 (a Llama read from a GGUF file), MiniLM (a BERT encoder from safetensors) and
MobileNetV2's image embeddings, each rebuilt on the core's blocks and hooks so that the
lessons can read and change its attention. May import the core and `plumbing`, never a lesson;
the lessons and the views import it.
"""
