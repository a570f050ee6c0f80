//! Schedule maths: Kubernetes-compatible cron, time zones, DST and missed runs. Pure: no API
//! calls, and the current time is always passed in.
