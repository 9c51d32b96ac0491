def total(price, discount):
    """The price after the discount, a fraction between 0 and 1."""
    return price - discount
