"""The notebook runner behind `make run` and `make notebooks`: fresh kernel per notebook, a
table of notebook/status/seconds, the site's pages out, a failing notebook reported and never
stored, and each figure's smallest font size recorded in its PNG."""
import base64

import nbformat
import pytest
from helpers import TINY_PNG

from attnlab.classroom import figures, runner, series, site, student

HEADER = ("# ---\n# jupyter:\n#   kernelspec:\n#     display_name: Python 3\n"
          "#     language: python\n#     name: python3\n# ---\n\n")


@pytest.mark.integration  # a subprocess, a kernel, a build or other kernels: make test-all
def test_runs_in_order_reports_failures_and_writes_the_sites_pages(tmp_path, monkeypatch,
                                                                    capsys):
    (tmp_path / "01_ok.py").write_text(HEADER + "# %% [markdown]\n# # Six times seven\n"
                                       "# %%\nx = 6 * 7\nprint(x)\n")
    (tmp_path / "02_broken.py").write_text(HEADER + "# %%\nraise ValueError('on purpose')\n")
    monkeypatch.setattr(series, "NOTEBOOK_DIR", tmp_path)
    monkeypatch.setattr(site, "BUILD", tmp_path / "build")  # no vendored MathJax: TeX shows
    assert [p.name for p in series.notebook_paths()] == ["01_ok.ipynb", "02_broken.ipynb"]

    code = runner.main(["--inplace", "--html", str(tmp_path / "html")])
    out = capsys.readouterr().out
    assert code == 1
    table = out[out.index("notebook  "):].splitlines()
    assert table[0].split() == ["notebook", "status", "seconds"]
    assert table[1].split()[:2] == ["01_ok.ipynb", "ok"]
    assert table[2].split()[:2] == ["02_broken.ipynb", "FAILED"]
    assert "02_broken.ipynb failed: ValueError: on purpose" in out
    assert "run `make vendor`" in out

    stored = nbformat.read(tmp_path / "01_ok.ipynb", as_version=4)  # executed in place
    assert stored.cells[1].execution_count == 1 and stored.cells[1].outputs[0]["text"] == "42\n"
    assert not (tmp_path / "02_broken.ipynb").exists()  # a failed run is never stored
    page = (tmp_path / "html" / "01_ok.html").read_text()
    assert "42" in page and 'class="attnlab-nav"' in page  # the site's template
    assert '<a href="01_ok.html">Six times seven</a>' in (tmp_path / "html" / "index.html"
                                                          ).read_text()


def test_unknown_notebook_names_are_refused(tmp_path, monkeypatch):
    (tmp_path / "01_ok.py").write_text(HEADER + "# %%\n1\n")
    monkeypatch.setattr(series, "NOTEBOOK_DIR", tmp_path)
    with pytest.raises(SystemExit, match=r"no notebook matches \['10'\]; known: \['01_ok'\]"):
        series.notebook_paths(["10"])


def test_notebook_lists_ignore_the_student_edition(tmp_path, monkeypatch):
    (tmp_path / "01_a.py").write_text(HEADER)
    (tmp_path / "student").mkdir()
    (tmp_path / "student" / "02_b.ipynb").write_text("{}")
    monkeypatch.setattr(series, "NOTEBOOK_DIR", tmp_path)
    assert series.notebook_stems() == ["01_a"]


@pytest.mark.integration  # a subprocess, a kernel, a build or other kernels: make test-all
def test_figures_drawn_in_the_runners_kernels_record_their_smallest_text(tmp_path):
    """In a kernel the runner starts, each figure's PNG carries its smallest drawn font size in
    PNG pixels: size in points x dpi / 72, ticks outside the view and hidden texts not counted."""
    (tmp_path / "01_plot.py").write_text(HEADER + "\n".join([
        "# %%",
        "import matplotlib.pyplot as plt",
        "# %%",
        "fig, ax = plt.subplots(figsize=(4, 3), dpi=90)",
        "ax.plot([0, 1], [0, 1])",
        "ax.tick_params(labelsize=9)",
        "ax.set_title('weights', fontsize=20)",
        "ax.text(0.5, 0.5, 'hidden', fontsize=4, visible=False)",
        "plt.show()",
        "fig, ax = plt.subplots(dpi=100)",
        "ax.set_xticks([]); ax.set_yticks([])",
        "ax.text(0.5, 0.5, 'note', fontsize=30)",
        "plt.show()",
    ]) + "\n")
    nb, _, error = runner.execute(tmp_path / "01_plot.ipynb")
    assert error is None
    pngs = [base64.b64decode(o["data"]["image/png"]) for o in nb.cells[1].outputs
            if "image/png" in o.get("data", {})]
    assert [figures.text_chunks(png).get(figures.KEY) for png in pngs] == ["11.2", "41.7"]


def test_text_chunks_are_added_once_and_read_back():
    once = figures.add_text_chunk(TINY_PNG, figures.KEY, "9.0")
    twice = figures.add_text_chunk(once, figures.KEY, "12.5")
    assert figures.text_chunks(once) == {figures.KEY: "9.0"}
    assert figures.text_chunks(twice) == {figures.KEY: "12.5"}
    assert twice.count(figures.KEY.encode()) == 1  # replaced, not added again
    with pytest.raises(ValueError, match="not a PNG"):
        figures.text_chunks(b"GIF89a")


@pytest.mark.integration  # a subprocess, a kernel, a build or other kernels: make test-all
def test_the_tools_take_a_notebooks_folder_and_refuse_one_without_notebooks(
        tmp_path, monkeypatch, capsys):
    """An installed attnlab has no checkout: the tools read the folder they are given, or the
    current directory, and a folder with no notebook is an error, not an empty success."""
    monkeypatch.setattr(series, "NOTEBOOK_DIR", tmp_path / "no checkout here")
    empty = tmp_path / "empty"
    empty.mkdir()
    for tool in (runner.main, student.main, site.main):
        args = ["slides"] if tool is site.main else []
        with pytest.raises(SystemExit, match=r"no notebooks \(NN_name.ipynb or NN_name.py\) in "
                                             r".*empty: pass --notebooks DIR"):
            tool([*args, "--notebooks", str(empty)])
    course = tmp_path / "course"
    course.mkdir()
    (course / "01_ok.py").write_text(HEADER + "# %%\nprint(6 * 7)\n")
    monkeypatch.chdir(course)  # no --notebooks: the current directory
    assert runner.main(["--inplace"]) == 0
    rows = [line.split()[:2] for line in capsys.readouterr().out.splitlines()]
    assert ["01_ok.ipynb", "ok"] in rows
    assert student.main(["--notebooks", str(course)]) == 0
    assert (course / "student" / "01_ok.ipynb").exists()
