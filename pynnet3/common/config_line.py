"""Kaldi's config-line format: ``first-token key=value key2='quoted value' ...``.

Parsing follows Kaldi's ConfigLine: the first word is the line's kind unless
it contains '='; a value runs up to the whitespace before the next ``key=``,
so ``input=Append(a, b)`` needs no quotes; quotes (' or ") are stripped.
Getters mark keys as used so the caller can reject unknown keys afterwards
(Kaldi's HasUnusedValues), which is how misspelled options are caught.
"""

import re

from ..errors import ConfigError

_VALID_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]*$")


def is_valid_name(name):
    """Kaldi's IsValidName: letters, digits, '_', '-', '.'; not starting with a digit."""
    return bool(_VALID_NAME_RE.match(name))


def read_config_lines(text):
    """Kaldi's ReadConfigLines: (line_number, line) pairs with comments ('#...')
    and surrounding blanks removed, blank lines dropped."""
    out = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip(" \t\r")
        if line:
            out.append((number, line))
    return out


class ConfigLine:
    """One parsed config line. ``source``/``line_number`` are for errors."""

    __slots__ = ("whole_line", "first_token", "_data", "_used", "source", "line_number")

    def __init__(self, line, source=None, line_number=None):
        self.whole_line = line
        self.source = source
        self.line_number = line_number
        self._data = {}
        self._used = set()
        self.first_token = self._parse(line)

    def error(self, message):
        return ConfigError(message, self.source, self.line_number, self.whole_line)

    def _parse(self, line):
        pos, size = 0, len(line)
        while pos < size and line[pos].isspace():
            pos += 1
        start = pos
        while pos < size and not line[pos].isspace():
            if line[pos] == "=":
                pos = start
                break
            pos += 1
        first = line[start:pos]
        if first and not is_valid_name(first):
            raise self.error("invalid first token '%s'" % first)
        while pos < size:
            if line[pos].isspace():
                pos += 1
                continue
            eq = line.find("=", pos)
            if eq == pos or eq < 0:
                raise self.error("expected key=value, got '%s'" % line[pos:].split()[0])
            key = line[pos:eq]
            if not is_valid_name(key):
                raise self.error("invalid key '%s'" % key)
            if eq + 1 < size and line[eq + 1] in "'\"":
                quote = line[eq + 1]
                close = line.find(quote, eq + 2)
                if close < 0:
                    raise self.error("no matching quote for %s" % quote)
                self._data.setdefault(key, line[eq + 2:close])
                pos = close + 1
                continue
            end = size
            next_eq = line.find("=", eq + 1)
            if next_eq >= 0:
                space = max(line.rfind(" ", 0, next_eq), line.rfind("\t", 0, next_eq))
                if space > eq:
                    end = space
            while end > 0 and line[end - 1].isspace():
                end -= 1
            self._data.setdefault(key, line[eq + 1:end])
            pos = end
        return first

    # -- access ---------------------------------------------------------------
    def keys(self):
        return list(self._data)

    def has(self, key):
        return key in self._data

    def get_str(self, key, default=None):
        if key not in self._data:
            return default
        self._used.add(key)
        return self._data[key]

    def get_int(self, key, default=None):
        value = self.get_str(key)
        if value is None:
            return default
        try:
            return int(value)
        except ValueError:
            raise self.error("bad value for %s: expected an integer, got '%s'" % (key, value)) from None

    def get_float(self, key, default=None):
        value = self.get_str(key)
        if value is None:
            return default
        try:
            return float(value)
        except ValueError:
            raise self.error("bad value for %s: expected a number, got '%s'" % (key, value)) from None

    def get_bool(self, key, default=None):
        value = self.get_str(key)
        if value is None:
            return default
        if value[:1] in ("T", "t"):
            return True
        if value[:1] in ("F", "f"):
            return False
        raise self.error("bad value for %s: expected true or false, got '%s'" % (key, value))

    def get_int_list(self, key, default=None):
        """Integers separated by ':' or ',' (Kaldi's SplitStringToIntegers)."""
        value = self.get_str(key)
        if value is None:
            return default
        try:
            return [int(v) for v in re.split(r"[:,]", value) if v != ""]
        except ValueError:
            raise self.error("bad value for %s: expected integers separated by ':' or ',', "
                             "got '%s'" % (key, value)) from None

    def require(self, key, getter="str"):
        """A value that must be present; names the key when it is missing."""
        if key not in self._data:
            raise self.error("missing required config value '%s'" % key)
        return getattr(self, "get_" + getter)(key)

    def unused_keys(self):
        return [k for k in self._data if k not in self._used]

    def check_all_used(self):
        """Kaldi's HasUnusedValues check: an unknown key is an error."""
        unused = self.unused_keys()
        if unused:
            raise self.error("unknown or unused config value(s): "
                             + " ".join("%s=%s" % (k, self._data[k]) for k in unused))


def name_matches_pattern(name, pattern):
    """Kaldi's NameMatchesPattern: ``*`` matches any sequence; nothing else is special."""
    regex = "".join(".*" if c == "*" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, name, re.DOTALL) is not None
