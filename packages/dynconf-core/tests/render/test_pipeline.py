"""fetch → validate → render → publish for a set of outputs, all or none."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from dynconf.errors import BackendError, DynconfError, InvalidError, MissingError
from dynconf.pipeline import RenderRequest, prepare, publish, publish_empty, render_once
from dynconf.publish import history_dir, meta_path
from dynconf.render import OutputSpec, TemplateSource
from dynconf.stores import ABSENT, Absent, Fetched, WatchCapability
from tests.fixtures.hostile_documents import HOSTILE

DOC = {"app": {"host": "h", "port": 80}, "cache": {"size": 3}}


def fetched(document: dict[str, object] = DOC, revision: str | None = "7") -> Fetched:
    return Fetched(text=json.dumps(document), format="json", revision=revision)


def three_outputs(tmp_path: Path, third_template: str = "size={{ size }}\n") -> RenderRequest:
    return RenderRequest(
        outputs=[
            OutputSpec(path=tmp_path / "app.json", section="app"),
            OutputSpec(path=tmp_path / "cache.yaml", section="cache"),
            OutputSpec(
                path=tmp_path / "cache.env",
                section="cache",
                template=TemplateSource.inline(third_template),
            ),
        ]
    )


def test_prepare_renders_every_output_and_fingerprints_the_main_one(tmp_path: Path) -> None:
    request = three_outputs(tmp_path)
    prepared = prepare(fetched(), request)
    assert list(prepared.outputs) == [spec.path for spec in request.outputs]
    main = prepared.outputs[tmp_path / "app.json"]
    assert json.loads(main) == DOC["app"]
    assert prepared.outputs[tmp_path / "cache.env"] == b"size=3\n"
    assert prepared.fingerprint == "sha256:" + hashlib.sha256(main).hexdigest()
    assert prepared.revision == "7"
    assert list(tmp_path.iterdir()) == []


def test_a_failing_third_output_leaves_the_first_two_untouched(tmp_path: Path) -> None:
    good = three_outputs(tmp_path)
    publish(prepare(fetched(), good), good)
    before = {path: path.read_bytes() for path in tmp_path.iterdir()}
    broken = three_outputs(tmp_path, third_template="size={{ sise }}\n")
    changed = {"app": {"host": "new", "port": 81}, "cache": {"size": 4}}
    with pytest.raises(InvalidError, match="`sise`"):
        prepare(fetched(changed), broken)
    assert {path: path.read_bytes() for path in tmp_path.iterdir()} == before


def test_a_failed_render_keeps_the_last_good_file(tmp_path: Path) -> None:
    request = RenderRequest(outputs=[OutputSpec(path=tmp_path / "app.json", section="app")])
    publish(prepare(fetched(), request), request)
    last_good = (tmp_path / "app.json").read_bytes()
    with pytest.raises(MissingError, match="the section `app` is not in the document"):
        prepare(fetched({"other": {}}), request)
    assert (tmp_path / "app.json").read_bytes() == last_good


def test_unchanged_detection_compares_every_output(tmp_path: Path) -> None:
    request = three_outputs(tmp_path)
    first = prepare(fetched(), request)
    assert not first.unchanged_from(None)
    assert prepare(fetched(revision="8"), request).unchanged_from(first)
    other_cache = {"app": DOC["app"], "cache": {"size": 4}}
    second = prepare(fetched(other_cache), request)
    assert second.fingerprint == first.fingerprint
    assert not second.unchanged_from(first)


def test_size_ceiling_is_checked_before_parsing(tmp_path: Path) -> None:
    request = RenderRequest(outputs=[OutputSpec(path=tmp_path / "app.json")], max_document_bytes=10)
    oversized = Fetched(text="{" + " " * 20, format="json")
    with pytest.raises(InvalidError) as caught:
        prepare(oversized, request)
    assert str(caught.value).startswith(
        "the store answered with 21 bytes, past the 10-byte ceiling; raise it with "
        "--max-document-bytes"
    )


def test_schema_checks_the_main_section_and_is_reread_each_time(tmp_path: Path) -> None:
    schema = tmp_path / "schema.json"
    out = tmp_path / "out"
    out.mkdir()
    request = RenderRequest(
        outputs=[OutputSpec(path=out / "app.json", section="app")], schema=schema
    )
    schema.write_text(json.dumps({"required": ["host"]}), encoding="utf-8")
    prepare(fetched(), request)
    schema.write_text(json.dumps({"required": ["user"]}), encoding="utf-8")
    with pytest.raises(InvalidError, match=r"the document does not satisfy /required"):
        prepare(fetched(), request)


def test_publish_writes_files_then_meta_files(tmp_path: Path) -> None:
    request = RenderRequest(
        outputs=[
            OutputSpec(path=tmp_path / "app.json", section="app", mode=0o640),
            OutputSpec(path=tmp_path / "cache.yaml", section="cache"),
        ],
        meta=True,
    )
    prepared = prepare(fetched(), request)
    seen_at_notify: list[tuple[bool, bool]] = []

    def after_files() -> None:
        for spec in request.outputs:
            seen_at_notify.append((spec.path.exists(), meta_path(spec.path).exists()))

    result = publish(prepared, request, now=1234, after_files=after_files)
    assert seen_at_notify == [(True, False), (True, False)]
    assert result.paths == [tmp_path / "app.json", tmp_path / "cache.yaml"]
    assert result.fingerprint == prepared.fingerprint
    main_meta = json.loads(meta_path(tmp_path / "app.json").read_text(encoding="utf-8"))
    assert main_meta == {"fingerprint": prepared.fingerprint, "revision": "7", "rendered_at": 1234}
    cache_meta = json.loads(meta_path(tmp_path / "cache.yaml").read_text(encoding="utf-8"))
    cache_bytes = (tmp_path / "cache.yaml").read_bytes()
    assert cache_meta["fingerprint"] == "sha256:" + hashlib.sha256(cache_bytes).hexdigest()
    assert meta_path(tmp_path / "app.json").stat().st_mode & 0o777 == 0o640


def test_publish_keeps_history_for_each_output(tmp_path: Path) -> None:
    request = RenderRequest(outputs=three_outputs(tmp_path).outputs, history=2)
    publish(prepare(fetched(), request), request, now=1)
    publish(prepare(fetched({"app": {"host": "x"}, "cache": {"size": 9}}), request), request, now=2)
    for spec in request.outputs:
        assert len(list(history_dir(spec.path).iterdir())) == 1


def test_request_refuses_no_outputs_duplicates_and_too_much_history(tmp_path: Path) -> None:
    with pytest.raises(BackendError):
        RenderRequest(outputs=[])
    same = OutputSpec(path=tmp_path / "a.json")
    with pytest.raises(BackendError, match="same file"):
        RenderRequest(outputs=[same, same])
    with pytest.raises(BackendError, match="0 to 10"):
        RenderRequest(outputs=[same], history=11)


def test_publish_empty_only_missing_leaves_files_with_content(tmp_path: Path) -> None:
    request = three_outputs(tmp_path)
    (tmp_path / "app.json").write_bytes(b"{}")
    written = publish_empty(request, only_missing=True)
    assert written == [tmp_path / "cache.yaml", tmp_path / "cache.env"]
    assert (tmp_path / "app.json").read_bytes() == b"{}"
    assert (tmp_path / "cache.env").read_bytes() == b""
    publish_empty(request)
    assert (tmp_path / "app.json").read_bytes() == b""


class OneAnswer:
    """A blocking store that answers one fixed thing."""

    capability = WatchCapability.INTERVAL

    def __init__(self, answer: Fetched | Absent) -> None:
        self.answer = answer

    def fetch(self) -> Fetched | Absent:
        return self.answer

    def describe(self) -> str:
        return "test store, key app"

    def changes(self, interval: float, stop: Callable[[], bool]) -> Iterator[Fetched | Absent]:
        return iter(())

    def close(self) -> None:
        pass


def test_render_once_fetches_renders_and_publishes(tmp_path: Path) -> None:
    request = RenderRequest(outputs=[OutputSpec(path=tmp_path / "app.json", section="app")])
    result = render_once(OneAnswer(fetched()), request)
    assert json.loads((tmp_path / "app.json").read_bytes()) == DOC["app"]
    assert result.revision == "7"


def test_render_once_refuses_an_absent_document(tmp_path: Path) -> None:
    request = RenderRequest(outputs=[OutputSpec(path=tmp_path / "app.json")])
    with pytest.raises(MissingError, match="the document is not in the store") as caught:
        render_once(OneAnswer(ABSENT), request)
    assert "test store" in str(caught.value)
    assert not (tmp_path / "app.json").exists()


@pytest.mark.parametrize("extension", ["json", "toml", "yaml", "properties"])
@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_hostile_document_is_one_engine_error_never_another_exception(
    tmp_path: Path, name: str, extension: str
) -> None:
    request = RenderRequest(outputs=[OutputSpec(path=tmp_path / f"app.{extension}")])
    # only the engine's errors may leave prepare; anything else fails the test right here
    try:
        prepare(Fetched(text=HOSTILE[name], format="json"), request)
    except DynconfError as error:
        refusal = str(error)
    else:
        refusal = ""  # rendered after all (YAML can hold a lone surrogate escaped)
    assert "\n" not in refusal
    assert "7777" not in refusal and "\\ud800" not in refusal
