"""What a session leaves behind: the JSON report, the summary on stderr, and the merge of a
distributed job's per-rank parts (``loopcheck report merge``)."""
