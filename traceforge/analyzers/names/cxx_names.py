"""C++ names as profilers print them: scopes, template arguments, parameter lists, lambdas.

A demangled kernel name is a C++ declaration (``void at::native::elementwise_kernel<128, 4,
at::native::gpu_kernel_impl<...>(...)::{lambda(int)#1}>(int, ...)``). No kept Python library
parses demangler output back into a tree (demanglers go the other way, from the mangled
symbol), and the mangled symbol is rarely what a trace holds, so this module splits the
printed text at its top-level brackets: enough to find the kernel's own name, its template
arguments and the functor or lambda each argument names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

_OPEN = "<([{"
_CLOSE = ">)]}"
_IDENT = re.compile(r"~?[A-Za-z_$][\w$]*")
# " const" after a member function's parameter list: "operator()() const::{lambda()#2}".
_CONST_MEMBER = re.compile(r"\) const(?=::|$|[,>)\]])")
# Anonymous namespaces as GCC/LLVM (``(anonymous namespace)``), MSVC and NVIDIA's nsys
# (``<unnamed>``) print them.
_ANON = re.compile(r"\(anonymous namespace\)::|`anonymous namespace'::|<unnamed>::")
# nsys prints lambdas as ``[lambda(float) (instance 1)]``; GCC/LLVM as ``{lambda(float)#1}``.
_EDG_LAMBDA = re.compile(r"\[lambda\((.*?)\) \(instance (\d+)\)\]")
_OPERATOR = re.compile(r"operator(?:<<=|>>=|<=>|<<|>>|<=|>=|->\*|->|<|>|\(\)|\[\])")
_LAMBDA = re.compile(r"^\{lambda\((.*)\)#(\d+)\}$")
# An enum value as demanglers print it: (ck::InMemoryDataOperationEnum)1.
_ENUM_CAST = re.compile(r"\((?:[\w$]+::)*([\w$]+)\)(-?\d+)")
_INT_CAST = re.compile(r"\((?:unsigned |signed )?(?:int|long|long long|short|char|bool)\)(-?\d+)")


def _scan(s: str) -> tuple[list[int], bytearray]:
    """Depth of each character and which characters are brackets.

    A bracket sits at the depth outside it, so a matching pair shares one depth and what it
    encloses is one deeper. ``->`` and the ``<``/``>`` of ``operator<`` are not brackets.
    """
    plain = bytearray(len(s))
    for m in _OPERATOR.finditer(s):
        for i in range(m.start() + len("operator"), m.end()):
            plain[i] = 1
    for m in re.finditer("->", s):
        plain[m.start() + 1] = 1
    depths = []
    brackets = bytearray(len(s))
    depth = 0
    for i, ch in enumerate(s):
        if not plain[i] and ch in _CLOSE and depth:
            depth -= 1
            brackets[i] = 1
        elif not plain[i] and ch in _OPEN:
            brackets[i] = 1
            depths.append(depth)
            depth += 1
            continue
        depths.append(depth)
    return depths, brackets


def split_top(s: str, sep: str) -> list[str]:
    """Split ``s`` at ``sep`` where no bracket is open (template args, parameter lists)."""
    depths, _ = _scan(s)
    parts = []
    start = i = 0
    while i <= len(s) - len(sep):
        if depths[i] == 0 and s.startswith(sep, i):
            parts.append(s[start:i])
            i += len(sep)
            start = i
        else:
            i += 1
    parts.append(s[start:])
    return [p.strip() for p in parts]


def _group(s: str, open_: str) -> tuple[str, str] | None:
    """(inside, after) of the first top-level group that ``open_`` opens, or None."""
    depths, brackets = _scan(s)
    for i, ch in enumerate(s):
        if ch == open_ and brackets[i] and depths[i] == 0:
            for j in range(i + 1, len(s)):
                if brackets[j] and depths[j] == 0:
                    return s[i + 1:j], s[j + 1:]
            return s[i + 1:], ""
    return None


def clean(s: str) -> str:
    """One spelling for what demanglers print differently: no anonymous namespaces, no
    ``const`` after a lambda's ``operator()``, lambdas as ``{lambda(float)#1}``, ``(int)4``
    as ``4``, no space in ``operator ()`` or before ``*``/``&``."""
    s = _ANON.sub("", s)
    s = _EDG_LAMBDA.sub(r"{lambda(\1)#\2}", s)
    s = s.replace("operator ()", "operator()").replace(" *", "*").replace(" &", "&")
    s = _INT_CAST.sub(r"\1", s)
    return _CONST_MEMBER.sub(")", s).strip()


@dataclass(frozen=True)
class Part:
    """One ``::`` component: its name, template arguments and parameter list."""

    name: str
    targs: tuple[str, ...] = ()
    params: str | None = None

    @property
    def meaningful(self) -> bool:
        """An identifier a reader knows (not a lambda, an operator or a keyword)."""
        return bool(_IDENT.fullmatch(self.name)) and not self.name.startswith("operator")


def _part(text: str) -> Part:
    if text.startswith(("{", "[")):
        return Part(text)
    cut = [i for i in (text.find("<"), text.find("(")) if i > 0]
    if text.startswith("operator"):
        m = _OPERATOR.match(text)
        head_end = m.end() if m else len("operator")
        cut = [i for i in (text.find("<", head_end), text.find("(", head_end)) if i > 0]
    if not cut:
        return Part(text)
    name = text[: min(cut)].strip()
    rest = text[min(cut):]
    targs: tuple[str, ...] = ()
    if rest.startswith("<"):
        g = _group(rest, "<")
        if g is not None:
            inside, rest = g
            targs = tuple(a for a in split_top(inside, ",") if a)
    params = None
    if rest.lstrip().startswith("("):
        g = _group(rest.lstrip(), "(")
        params = g[0] if g is not None else None
    return Part(name, targs, params)


@lru_cache(maxsize=65536)
def parse(text: str) -> tuple[Part, ...]:
    """The ``::`` components of one declaration or template argument, return type dropped.

    ``void at::native::reduce_kernel<512, 1, ...>(...)`` -> ``(at, native,
    reduce_kernel<512, 1, ...>(...))``; ``std::enable_if<!(false), void>::type ns::kernel<..>``
    keeps only the declared name ``ns::kernel<..>``.
    """
    s = clean(text)
    while s.endswith(("&", "*")):
        s = s[:-1].rstrip()
    for q in (" const", " volatile"):
        if s.endswith(q):
            s = s[: -len(q)]
    words = split_top(s, " ")
    if len(words) > 1 and any(c in words[-1] for c in "<(:"):
        s = words[-1]
    return tuple(_part(p) for p in split_top(s, "::") if p)


_VALUE = re.compile(r"-?\d[\w.]*|true|false|\(\w[\w:]*\)-?\d+")
_BUILTIN = frozenset({
    "void", "bool", "char", "short", "int", "long", "signed", "unsigned", "float", "double",
    "const", "volatile", "size_t", "wchar_t", "__half", "half", "__nv_bfloat16",
    "__hip_bfloat16", "float2", "float4", "int2", "int4",
})


def is_literal(text: str) -> bool:
    """A value or a builtin type (``4``, ``true``, ``(Enum)5``, ``unsigned int``, ``float*``)."""
    t = text.strip()
    if _VALUE.fullmatch(t):
        return True
    words = t.replace("*", " ").replace("&", " ").split()
    return bool(words) and all(w in _BUILTIN for w in words)


def _plain(text: str) -> bool:
    return not any(c in text for c in "<(:")


def label(text: str) -> str:
    """The name a reader knows a template argument by: the functor, kernel or type name.

    ``at::native::CUDAFunctor_add<float>`` -> ``CUDAFunctor_add``; a lambda
    ``at::native::direct_copy_kernel_cuda(...)::{lambda()#3}::...::{lambda(float)#1}`` ->
    ``direct_copy_kernel_cuda`` (the function it is defined in); ``4`` -> ``4``.
    """
    cast = _ENUM_CAST.fullmatch(text.strip())
    if cast:
        return f"({cast.group(1)}){cast.group(2)}"
    if is_literal(text) or _plain(text):
        return text.strip()
    parts = parse(text)
    for p in reversed(parts):
        if p.meaningful:
            return p.name
    return parts[-1].name if parts else text


def children(text: str) -> tuple[str, ...]:
    """Template arguments of every part of ``text``, in order
    (``Functor<float>::operator()<ReduceAdd>`` -> ``(float, ReduceAdd)``)."""
    if is_literal(text) or _plain(text):
        return ()
    # Arguments of the scope count too: ``DeviceRadixSortPolicy<long, int, int>::Policy800``.
    return tuple(a for p in parse(text) for a in p.targs)


def lambda_key(text: str) -> tuple[str, str]:
    """(parameter types, number) of the innermost lambda ``text`` names, e.g.
    ``("float", "1")``; ``("", "")`` when it names none."""
    if is_literal(text) or _plain(text):
        return "", ""
    for p in reversed(parse(text)):
        m = _LAMBDA.match(p.name)
        if m:
            return ", ".join(label(a) for a in split_top(m.group(1), ",") if a), m.group(2)
    return "", ""
