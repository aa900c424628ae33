"""Where regions start: capture sites, and the nn.Module forwards checked where no capture site speaks for them."""
