"""The views: what draws or serves a page.

Plots and their text descriptions, the notebooks' widgets, the diagrams (SVG files shipped as
package data), the sentiment app and its web page. The top room of the library: a view may
import every room below it (lessons, pre-trained models, core, plumbing); only the exercises
and the classroom tooling import a view.
"""
