"""Userspace RoCE v2: headers, ICRC, whole packets, and (issue 3) the RC transport."""
