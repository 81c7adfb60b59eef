"""The workflows every front end calls (the command line, the batch runner, the window's compute), the task
protocol they follow (progress, partial results, cancel) and the inputs they open. No Qt here."""
