"""ingress-nginx's upstreaminfo access log format as a log parser reads it: the fields of its default
log-format-upstream, in order."""
from __future__ import annotations

import re

UPSTREAMINFO = re.compile(
    r'(?P<remote_addr>\S+) - (?P<remote_user>\S+) \[(?P<time_local>[^\]]+)\] "(?P<request>[^"]*)" (?P<status>\d{3}) '
    r'(?P<body_bytes_sent>\d+) "(?P<http_referer>[^"]*)" "(?P<http_user_agent>[^"]*)" (?P<request_length>\d+) '
    r'(?P<request_time>[\d.]+) \[(?P<proxy_upstream_name>[^\]]*)\] \[(?P<proxy_alternative_upstream_name>[^\]]*)\] '
    r'(?P<upstream_addr>\S+) (?P<upstream_response_length>\S+) (?P<upstream_response_time>\S+) '
    r'(?P<upstream_status>\S+) (?P<req_id>\S+)$')


def parse(lines: list[str]) -> list[dict[str, str]]:
    """The fields of each line in the upstreaminfo format (other lines, such as other programs' logs, are skipped)."""
    return [match.groupdict() for match in map(UPSTREAMINFO.match, lines) if match]
