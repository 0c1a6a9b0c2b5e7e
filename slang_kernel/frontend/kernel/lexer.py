"""A Pygments lexer for Slang (alias "slang", files *.slang), used by nbconvert and Sphinx.

Registered through the `pygments.lexers` entry point `slang = slang_kernel.frontend.kernel.lexer:SlangLexer`.
Kernel cells may start with `%%python`/`%%py` (the rest is Python) or contain `%backend`, `%show` and
`%run` line magics: those are lexed too.
"""

from __future__ import annotations

from pygments.lexer import RegexLexer, bygroups, include, using, words
from pygments.lexers.python import PythonLexer
from pygments.token import Comment, Keyword, Name, Number, Operator, Punctuation, String, Text, Whitespace

from .language import ATTRIBUTES, BUILTIN_TYPES, INTRINSICS, KEYWORDS, SEMANTICS

__all__ = ["SlangLexer"]


class SlangLexer(RegexLexer):
    name = "Slang"
    aliases = ["slang"]
    filenames = ["*.slang"]
    mimetypes = ["text/x-slang"]
    url = "https://shader-slang.org"

    tokens = {
        "root": [
            # a %%python cell: everything after the first line is Python
            (r"\A(%%(?:python|py)\b[^\n]*\n)([\s\S]*)", bygroups(Keyword.Pseudo, using(PythonLexer))),
            (r"^(\s*)(%(?:backend|show|run)\b)([^\n]*)", bygroups(Whitespace, Keyword.Pseudo, Text)),
            (r"^\s*#\s*\w+[^\n]*", Comment.Preproc),
            include("code"),
        ],
        "code": [
            (r"\s+", Whitespace),
            (r"//[^\n]*", Comment.Single),
            (r"/\*", Comment.Multiline, "comment"),
            (r'"(\\\\|\\[^\\]|[^"\\\n])*"', String.Double),
            (r"'(\\.|[^'\\])'", String.Char),
            (r"(\[\[?)(\s*)(" + "|".join(a.replace(":", r"\:") for a in ATTRIBUTES) + r")\b",
             bygroups(Punctuation, Whitespace, Name.Decorator)),
            (r"0[xX][0-9a-fA-F]+[uUlL]*", Number.Hex),
            (r"(\d+\.\d*|\.\d+)([eE][+-]?\d+)?[fFhHlL]?", Number.Float),
            (r"\d+[eE][+-]?\d+[fFhHlL]?", Number.Float),
            (r"\d+[uUlLfFhH]*", Number.Integer),
            (r"(struct|interface|enum|namespace|extension)(\s+)([A-Za-z_]\w*)",
             bygroups(Keyword, Whitespace, Name.Class)),
            (words(KEYWORDS, suffix=r"\b"), Keyword),
            (words(BUILTIN_TYPES, suffix=r"\b"), Keyword.Type),
            (words(SEMANTICS, suffix=r"\b"), Name.Constant),
            (words(INTRINSICS, suffix=r"\b"), Name.Builtin),
            (r"[A-Za-z_]\w*(?=\s*\()", Name.Function),
            (r"[A-Za-z_]\w*", Name),
            (r"[-+*/%&|^!~<>=?:]+", Operator),
            (r"[()\[\]{};,.]", Punctuation),
            (r".", Text),
        ],
        "comment": [
            (r"[^*/]+", Comment.Multiline),
            (r"\*/", Comment.Multiline, "#pop"),
            (r"[*/]", Comment.Multiline),
        ],
    }
