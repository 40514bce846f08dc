"""The corpus the Beam tests embed: three files of blank, CRLF, non-ASCII, undecodable, NUL
and over-long lines, with the dead letters each must give."""

import codecs

# A real multi-process Beam job on one machine: FnApiRunner with two worker processes.
RUNNER = [
    "--runner=FnApiRunner",
    "--direct_running_mode=multi_processing",
    "--direct_num_workers=2",
]

MAX_TOKENS = 12


# name -> (bytes of the file, {line: reason fragment} of its dead letters)
FILES = {
    "a.txt": (
        codecs.BOM_UTF8
        + "The cat sat on the mat .\n\nZürich café 中文 😀\n  spaces   around  \n\n".encode()
        + " ".join(f"w{i}" for i in range(MAX_TOKENS)).encode(),  # the limit exactly, no "\n"
        {},
    ),
    "b.txt": (
        b"First line .\r\nbad \xff byte\r\n\r\nnul \x00 here\r\n"
        + " ".join(["long"] * (MAX_TOKENS + 1)).encode()
        + b"\r\nold mac\rline end\r\n",
        {1: "is not valid UTF-8", 3: "holds a NUL byte", 4: "(max_tokens_per_line)"},
    ),
    "c.txt": ("\n".join(f"sentence number {i} ." for i in range(40)).encode() + b"\n", {}),
}


N_LINES = {"a.txt": 6, "b.txt": 7, "c.txt": 40}


def write_corpus(directory):
    """Writes ``FILES`` into ``directory``; returns it."""
    for name, (data, _) in FILES.items():
        (directory / name).write_bytes(data)
    return directory
