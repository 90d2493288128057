"""Userspace RoCE v2: headers, ICRC, whole packets, and the RC transport."""
