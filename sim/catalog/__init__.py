"""The catalogues: every name a scenario may choose — engines, HTTP registries, DNS client
strategies — with what each entails and where its code lives (imported on first use). The
scenario models read them for their choices, so they import nothing above the models."""
