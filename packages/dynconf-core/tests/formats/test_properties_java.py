"""A rendered ``.properties`` file read by the real ``java.util.Properties``.

The file exists for Java services, so the test is Java's own reader: a tiny program,
compiled with the machine's JDK, loads our output both as ISO-8859-1
(``load(InputStream)``) and as UTF-8 (``load(Reader)``), requires the two to agree, and
prints every entry hex-encoded. Java must see exactly the document's strings (a
non-string leaf: its text). Without a JDK the test skips, except under ``CI=true``.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
from pathlib import Path

import pytest
from format_strategies import TRICKY_STRINGS

from dynconf.document import Document, walk_leaves
from dynconf.formats import properties

JAVA_SOURCE = r"""
import java.io.InputStream;
import java.io.Reader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.Properties;
import java.util.TreeSet;

public class LoadProperties {
    public static void main(String[] args) throws Exception {
        Properties latin = new Properties();
        try (InputStream in = Files.newInputStream(Paths.get(args[0]))) {
            latin.load(in);
        }
        Properties utf8 = new Properties();
        try (Reader in = Files.newBufferedReader(Paths.get(args[0]), StandardCharsets.UTF_8)) {
            utf8.load(in);
        }
        if (!latin.equals(utf8)) {
            System.err.println("the ISO-8859-1 and UTF-8 readings differ");
            System.exit(2);
        }
        StringBuilder out = new StringBuilder();
        for (String key : new TreeSet<>(latin.stringPropertyNames())) {
            out.append(hex(key)).append(' ').append(hex(latin.getProperty(key))).append('\n');
        }
        System.out.print(out);
    }

    private static String hex(String text) {
        StringBuilder out = new StringBuilder("=");
        for (byte b : text.getBytes(StandardCharsets.UTF_8)) {
            out.append(String.format("%02x", b));
        }
        return out.toString();
    }
}
"""

KEYS = [
    "plain",
    "with space",
    " lead",
    "trail ",
    "a=b",
    "a:b",
    "#hash",
    "!bang",
    "back\\slash",
    "tab\tkey",
    "line\nkey",
    "ключ",
    "日本",
    "😀",
    "5432",
    "true",
]
EXTRA_VALUES = [
    "  both  ",
    "= starts with equals",
    ": starts with colon",
    "# not a comment",
    "! not a comment either",
    "ends with a backslash\\",
    "\\\\",
    "multi\nline\r\nvalue",
    "\ttab first",
    "\x0cform feed",
    "astral 😀 and 𝄞",
    "5432",
    "true",
    "1.10",
    '"quoted"',
    "",
]


def _random_strings(count: int) -> list[str]:
    pools = [
        [chr(c) for c in range(0x20, 0x7F)],
        [chr(c) for c in range(0x00, 0x20)] + ["\x7f", "\x85", "\xa0"],
        [chr(c) for c in range(0xA0, 0x100)],
        ["\u2028", "\u3000", "\ufeff", "日", "本", "é", "ß", "\uffff"],
        ["😀", "𝄞", "\U0010ffff", "\U00010000"],
    ]
    rng = random.Random(13)
    return [
        "".join(rng.choice(rng.choice(pools)) for _ in range(rng.randrange(0, 12)))
        for _ in range(count)
    ]


def _tricky_document() -> Document:
    values = [*TRICKY_STRINGS, *EXTRA_VALUES, *_random_strings(300)]
    document: Document = {f"v{index}": value for index, value in enumerate(values)}
    document.update({key: f"key {index}" for index, key in enumerate(KEYS)})
    document["db"] = {"host": "h", "port": "5432", "pool": {"max": 8, "ratio": 0.5}}
    document["typed"] = {"yes": True, "no": False, "big": 2**63 - 1, "neg": -0.0, "e": 1e16}
    document["float"] = {"inf": float("inf"), "nan": float("nan")}
    return document


def _java(tmp_path: Path) -> tuple[str, str]:
    javac, java = shutil.which("javac"), shutil.which("java")
    if javac is None or java is None:
        if os.environ.get("CI") == "true":
            pytest.fail("CI must have a JDK: javac and java are not on PATH")
        pytest.skip("no JDK (javac/java) on PATH")
    source = tmp_path / "LoadProperties.java"
    source.write_text(JAVA_SOURCE, encoding="utf-8")
    subprocess.run([javac, "-d", str(tmp_path), str(source)], check=True, timeout=120)
    return java, str(tmp_path)


def _java_reads(java: str, classpath: str, file: Path) -> dict[str, str]:
    run = subprocess.run(
        [java, "-cp", classpath, "LoadProperties", str(file)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    entries: dict[str, str] = {}
    for line in run.stdout.splitlines():
        key, value = line.split(" ")
        entries[bytes.fromhex(key[1:]).decode()] = bytes.fromhex(value[1:]).decode()
    return entries


def test_java_properties_reads_exactly_the_documents_strings(tmp_path: Path) -> None:
    java, classpath = _java(tmp_path)
    document = _tricky_document()
    file = tmp_path / "app.properties"
    file.write_bytes(properties.dump(document).encode("utf-8"))
    expected = {path: properties.java_text(value) for path, value in walk_leaves(document)}
    assert _java_reads(java, classpath, file) == expected
