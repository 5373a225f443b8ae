from toylib.tictactoe.measure import main
main()
