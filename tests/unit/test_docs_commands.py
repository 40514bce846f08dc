"""Every command the documents name exists and takes the flags they give it.

A command is named in a fenced code block or an inline code span of README.md, docs/*.md,
serving/README.md or export/README.md: ``python[3] DIR/NAME.py`` (``benchmarks``, ``fuzz``,
``scripts``, ``serving``, ``export``) and ``bash DIR/NAME.sh`` must name a file of the tree;
``elmo-tf COMMAND [SUBCOMMAND]`` a command of the console script's parser. Each ``--flag``
that follows on the same command must be one its parser declares: the command line's own
(``elmo_tf.cli.main.build_parser``), or a script's ``add_argument`` calls, read from its
source. What the documents run is tested by running it (tests/integration/test_docs_*.py);
this rule also covers the commands they only name, which no test runs.
"""

import ast
import re

import pytest
from support.extras import installed
from support.paths import ROOT

from elmo_tf.cli import beam as beam_command
from elmo_tf.cli.main import _all_parsers, build_parser

DOCUMENT_PATHS = [
    ROOT / "README.md",
    ROOT / "ARCHITECTURE.md",
    *sorted((ROOT / "docs").glob("*.md")),
    ROOT / "serving" / "README.md",
    ROOT / "export" / "README.md",
]
SCRIPT = re.compile(r"(?:benchmarks|fuzz|scripts|serving|export)/[\w/]+\.(?:py|sh)")
SEPARATORS = re.compile(r"&&|\|\||[|;()]")
# What may stand before a command on its line: a prompt, variables set for it, a wrapper.
PREFIXES = ("$", "time", "exec", "nohup")
ASSIGNMENT = re.compile(r"[A-Za-z_]\w*=\S*")
WORD = re.compile(r"[a-z][\w-]*")  # a command's name (not a message's "elmo-tf embed:")
FLAG = re.compile(r"--[A-Za-z][\w-]*")
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.S | re.M)
INLINE = re.compile(r"`([^`\n]+)`")
# Scripts that run an elmo-tf command with their arguments (os.execv): they take its flags.
WRAPPERS = {
    "export/saved_model.py": ("export", "saved-model"),
    "export/tflite.py": ("export", "tflite"),
}


def code_spans(text):
    """The code a document shows: its fenced blocks (backslash continuations joined) and the
    inline code spans of its prose."""
    spans = [block.replace("\\\n", " ") for block in FENCE.findall(text)]
    prose = FENCE.sub("", text)
    return spans + INLINE.findall(prose)


def named_commands(text):
    """``[("script", path, flags)]`` and ``[("elmo-tf", words, flags)]`` of a document's code:
    each command that starts a line, a span or a piece of a pipeline (after a prompt, variable
    assignments or ``time``), with the words that follow it up to the end of the command."""
    found = []
    for span in code_spans(text):
        for line in span.splitlines():
            for piece in SEPARATORS.split(line):
                words = piece.split()
                while words and (words[0] in PREFIXES or ASSIGNMENT.fullmatch(words[0])):
                    words.pop(0)
                flags = [w for w in words if FLAG.fullmatch(w.split("=")[0])]
                if len(words) >= 2 and words[0] == "elmo-tf" and WORD.fullmatch(words[1]):
                    found.append(("elmo-tf", words[1:], flags))
                elif (
                    len(words) >= 2
                    and words[0] in ("python", "python3", "bash")
                    and SCRIPT.fullmatch(words[1])
                ):
                    found.append(("script", words[1], flags))
    return found


def script_flags(path):
    """The option strings a script's ``add_argument`` calls declare (read, not run)."""
    flags = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "add_argument":
            for arg in node.args:
                if isinstance(arg, ast.Constant) and str(arg.value).startswith("-"):
                    flags.add(arg.value)
    return flags | {"--help"}


def _option_strings(parser):
    return {s for action in parser._actions for s in action.option_strings}


def _subcommands(parser):
    for action in parser._actions:
        if action.choices and hasattr(action, "_name_parser_map"):
            return action.choices
    return {}


def beam_options():
    """``--NAME`` of every Beam pipeline option (``PipelineOptions``), where Beam is here."""
    if not installed("apache_beam"):
        return set()
    from apache_beam.options.pipeline_options import PipelineOptions

    return {f"--{name}" for name in PipelineOptions([]).get_all_options()}


@pytest.fixture(scope="module")
def parser():
    return build_parser()


def command_flags(parser, words):
    """``(the command's name, its flags)`` for ``elmo-tf WORDS``; ``None`` for no command."""
    commands = _subcommands(parser)
    if words[0] not in commands:
        return None
    name, command = words[0], commands[words[0]]
    nested = _subcommands(command)
    if nested and len(words) > 1 and words[1] in nested:
        name, command = f"{name} {words[1]}", nested[words[1]]
    flags = {"--help", "--verbose"}
    if name == "beam":  # arguments passed on to the job's parser, the rest to Beam's options
        command = beam_command.build_parser()
        flags |= beam_options()
    for sub in _all_parsers(command):
        flags |= _option_strings(sub)
    return name, flags


def problems(document, text, parser):
    found = []
    for kind, named, flags in named_commands(text):
        if kind == "script":
            path = ROOT / named
            if not path.is_file():
                found.append(f"{document}: {named} is not in the tree")
                continue
            if named in WRAPPERS:
                known = command_flags(parser, list(WRAPPERS[named]))[1]
            elif path.suffix == ".py":
                known = script_flags(path)
            else:
                known = None
            label = named
        else:
            result = command_flags(parser, named)
            if result is None:
                found.append(f"{document}: elmo-tf {named[0]} is no command")
                continue
            label, known = f"elmo-tf {result[0]}", result[1]
        for flag in flags:
            if known is not None and flag.split("=")[0] not in known:
                found.append(f"{document}: {label} takes no {flag}")
    return found


@pytest.mark.parametrize("path", DOCUMENT_PATHS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_named_command_runs_as_named(path, parser):
    text = path.read_text(encoding="utf-8")
    assert problems(str(path.relative_to(ROOT)), text, parser) == []


def test_the_documents_name_commands():
    """The rule reads what it should: each document set names scripts and commands."""
    counts = {"script": 0, "elmo-tf": 0}
    for path in DOCUMENT_PATHS:
        for kind, _, _ in named_commands(path.read_text(encoding="utf-8")):
            counts[kind] += 1
    assert counts["script"] > 20 and counts["elmo-tf"] > 60


def test_the_rule_sees_a_missing_script_a_missing_command_and_a_wrong_flag(parser):
    text = "\n".join(
        [
            "Run `python benchmarks/gone.py --minutes 1` first.",
            "```bash",
            "python benchmarks/gpu.py --minutes 2 --no-such-flag",
            "elmo-tf embed in.txt out.hdf5 --top --layer 3 \\",
            "    --batch-size 8 | head",
            "elmo-tf export saved-model out --model sotu",
            "elmo-tf frobnicate --x",
            "bash scripts/numerics_matrix.sh",
            "python3 export/saved_model.py out --model sotu --colour red",
            "elmo-tf beam --input a.txt --output o --runner DirectRunner --bogus",
            "```",
            "elmo-tf embed: error: argument --top: not allowed",  # an error message, no command
        ]
    )
    assert sorted(problems("doc.md", text, parser)) == [
        "doc.md: benchmarks/gone.py is not in the tree",
        "doc.md: benchmarks/gpu.py takes no --no-such-flag",
        "doc.md: elmo-tf beam takes no --bogus",
        "doc.md: elmo-tf embed takes no --layer",
        "doc.md: elmo-tf frobnicate is no command",
        "doc.md: export/saved_model.py takes no --colour",
    ]


def test_the_wrappers_run_the_command_they_are_checked_as():
    for script, words in WRAPPERS.items():
        source = (ROOT / script).read_text(encoding="utf-8")
        assert re.search(r'"-m", "elmo_tf", ' + ", ".join(f'"{w}"' for w in words), source)
