"""The Hugging Face Space's entry point (and `make app`'s): attnlab's sentiment app as a web page.

The models are built, or loaded from the app's cache, before the server starts; the server
listens on $GRADIO_SERVER_NAME:$GRADIO_SERVER_PORT (a Space sets 0.0.0.0:7860), else
127.0.0.1:7860. Everything the page does is attnlab.web, over attnlab.app's SentimentApp.
"""
from attnlab.web import main

if __name__ == "__main__":
    main()
