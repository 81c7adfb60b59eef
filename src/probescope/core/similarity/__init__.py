"""Human similarity judgments, psychological embeddings, and model agreement with people."""
