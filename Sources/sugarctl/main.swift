print("stub")
