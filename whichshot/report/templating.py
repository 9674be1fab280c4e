"""The one Jinja environment of the report: autoescaped (model output and claims' quotes are
untrusted text), with the number filters of report.format."""

from jinja2 import Environment, PackageLoader, select_autoescape

from whichshot.report.format import format_bare, format_lossless, format_number, format_value

ENV = Environment(
    loader=PackageLoader("whichshot.report", "templates"),
    autoescape=select_autoescape(["html", "j2"], default=True),
    trim_blocks=True,
    lstrip_blocks=True,
)
ENV.filters.update(num=format_number, value=format_value, bare=format_bare, lossless=format_lossless)
