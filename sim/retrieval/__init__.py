"""`tooldns eval`: retrieval quality of ToolDNS routing against flat and published baselines."""
