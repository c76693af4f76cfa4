"""Model servers the workflow owns: started for a job, polled until ready, stopped however it ends."""
