"""Stand-in for the `expecttest` package, which Debian does not ship and torch's common_utils
imports. Only the runner puts this folder on sys.path.

The real package can rewrite a test's source to accept new output (EXPECTTEST_ACCEPT=1);
the distributed suite never calls the inline-expect assertions, so here they only compare
and there is nothing to accept.
"""
import unittest

ACCEPT = False


def _normalize(text):
    # expecttest compares after dedenting the expected literal and stripping its first newline.
    lines = text.split("\n")
    if lines and lines[0] == "":
        lines = lines[1:]
    indents = [len(l) - len(l.lstrip()) for l in lines if l.strip()]
    cut = min(indents) if indents else 0
    return "\n".join(l[cut:] for l in lines)


class TestCase(unittest.TestCase):
    longMessage = True

    def assertExpectedInline(self, actual, expect, skip=0):
        self.assertMultiLineEqual(_normalize(expect), actual)

    def assertExpectedRaisesInline(self, exc_type, callable, expect, *args, **kwargs):
        try:
            callable(*args, **kwargs)
        except exc_type as e:
            self.assertExpectedInline(str(e), expect)
            return
        self.fail(f"Did not raise when expected to: {exc_type.__name__}")
