"""The paid video service: its client, checks on what it answers, the MP4 check, the model catalogue, pacing."""
