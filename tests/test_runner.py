"""The notebook runner behind `make run` and `make notebooks`: fresh kernel per notebook, a
table of notebook/status/seconds, HTML out, a failing notebook reported and never stored."""
import nbformat

from attnlab.classroom import runner

HEADER = ("# ---\n# jupyter:\n#   kernelspec:\n#     display_name: Python 3\n"
          "#     language: python\n#     name: python3\n# ---\n\n")


def test_runs_in_order_reports_failures_and_writes_html(tmp_path, monkeypatch, capsys):
    (tmp_path / "01_ok.py").write_text(HEADER + "# %%\nx = 6 * 7\nprint(x)\n")
    (tmp_path / "02_broken.py").write_text(HEADER + "# %%\nraise ValueError('on purpose')\n")
    monkeypatch.setattr(runner, "NOTEBOOK_DIR", tmp_path)
    assert [p.name for p in runner.notebook_paths()] == ["01_ok.ipynb", "02_broken.ipynb"]

    code = runner.main(["--inplace", "--html", str(tmp_path / "html")])
    out = capsys.readouterr().out
    assert code == 1
    table = out[out.index("notebook  "):].splitlines()
    assert table[0].split() == ["notebook", "status", "seconds"]
    assert table[1].split()[:2] == ["01_ok.ipynb", "ok"]
    assert table[2].split()[:2] == ["02_broken.ipynb", "FAILED"]
    assert "02_broken.ipynb failed: ValueError: on purpose" in out

    stored = nbformat.read(tmp_path / "01_ok.ipynb", as_version=4)  # executed in place
    assert stored.cells[0].execution_count == 1 and stored.cells[0].outputs[0]["text"] == "42\n"
    assert not (tmp_path / "02_broken.ipynb").exists()  # a failed run is never stored
    assert "42" in (tmp_path / "html" / "01_ok.html").read_text()


def test_unknown_notebook_names_are_refused(tmp_path, monkeypatch):
    (tmp_path / "01_ok.py").write_text(HEADER + "# %%\n1\n")
    monkeypatch.setattr(runner, "NOTEBOOK_DIR", tmp_path)
    try:
        runner.notebook_paths(["09"])
    except SystemExit as e:
        assert "no notebook matches ['09']" in str(e) and "01_ok" in str(e)
    else:
        raise AssertionError("an unknown name must stop the runner")


def test_notebook_lists_ignore_the_student_edition(tmp_path, monkeypatch):
    (tmp_path / "01_a.py").write_text(HEADER)
    (tmp_path / "student").mkdir()
    (tmp_path / "student" / "02_b.ipynb").write_text("{}")
    monkeypatch.setattr(runner, "NOTEBOOK_DIR", tmp_path)
    assert runner.notebook_stems() == ["01_a"]
    assert [p.name for p in runner.notebook_paths()] == ["01_a.ipynb"]
