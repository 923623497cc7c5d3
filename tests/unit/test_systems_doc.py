"""docs/systems.md is rendered from the descriptor model (harness/resolve/systems_doc.py), so it
cannot drift: a changed field, docstring or default fails here until the page is regenerated."""

from __future__ import annotations

from pathlib import Path

from harness.resolve import systems, systems_doc

DOC = Path(__file__).resolve().parents[2] / "docs" / "systems.md"


def test_docs_systems_md_is_the_model_rendered():
    want = systems_doc.markdown()
    have = DOC.read_text(encoding="utf-8") if DOC.exists() else ""
    assert have == want, (
        f"docs/systems.md differs from the model: regenerate it with `{systems_doc.REGENERATE}`"
    )


def test_the_minimal_example_validates(tmp_path):
    p = tmp_path / "my-node.yaml"
    p.write_text(systems_doc.MINIMAL)
    assert systems.problems(p) == []
    spec = systems.load_file(p)
    assert (spec.name, spec.world_size, spec.tuned_config) == ("my-node", 8, "dgx-h100x1")
    # it holds every required field, and the page shows it verbatim
    required = {k for k, f in systems_doc.fields() if f.is_required() and "." not in k}
    assert required <= {line.split(":")[0] for line in systems_doc.MINIMAL.splitlines()}
    assert systems_doc.MINIMAL.rstrip() in systems_doc.markdown()


def test_every_field_has_a_meaning_and_every_number_a_unit():
    rows = dict(systems_doc.fields())
    no_meaning = [k for k, f in rows.items() if not systems_doc._meaning(f)]
    no_unit = [k for k, f in rows.items() if systems_doc.numeric(f.annotation) and k not in systems_doc.UNITS]
    assert no_meaning == [] and no_unit == []
    assert set(systems_doc.UNITS) <= set(rows)  # no unit for a field that is gone
    assert (
        "tuned_config" in rows and "launcher.container.image" in rows and "power.interconnect[].max_w" in rows
    )


def test_the_doc_command_prints_the_page(capsys, tmp_path):
    import pytest

    from harness.cli import main

    with pytest.raises(SystemExit) as e:
        main(["systems", "doc", "-o", str(tmp_path / "s.md")])
    assert e.value.code == 0
    assert (tmp_path / "s.md").read_text() == systems_doc.markdown()
