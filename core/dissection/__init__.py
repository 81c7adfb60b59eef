"""Network Dissection: thresholds, IoU, Detection Accuracy and compositional explanations by beam search."""
