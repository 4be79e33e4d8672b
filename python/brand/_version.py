"""The package's one version: pyproject.toml reads it from here when the
package is built, and the user agent (``brand-python/VERSION``) sends it.

The Go server has no version of its own to follow (cmd/brand's version is
"dev" unless set with -ldflags at build time), so the package started at
0.1.0.
"""

__version__ = "0.1.0"
