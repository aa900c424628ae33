"""What the calls that reach a function pass it: None-states and literals, and the classes a base-class parameter narrows to."""
