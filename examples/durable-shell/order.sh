#!/bin/sh
# order.sh: the classic durable job as a shell script run by `workron
# worker`: charge a card, wait for the payment provider's webhook (an
# event, with a timeout), send a receipt. Submit it with
#
#	workron submit --env ORDER=order-42 -- sh examples/durable-shell/order.sh
#
# then, once `workron jobs get ID` shows it parked on its wait, play the
# webhook from anywhere:
#
#	workron events send payment.settled order-42 '{"status":"settled"}'
#
# While the job waits it is parked: the worker ended this script, and no
# slot is held. When the event comes, the script runs again from the top:
# the charge replays its recorded output without running again, the wait
# prints the event's payload, and the receipt runs once.
#
# ORDER is the order id (the event's key); TIMEOUT how long to wait for
# the webhook (default 1h); LOG, when set, a file each step's command
# appends a line to.
set -e
: "${ORDER:?set ORDER, the order id}"

charge=$(workron step charge -- sh -c 'echo "charged $ORDER" >> "${LOG:-/dev/null}"; echo "ch_$ORDER"')

code=0
payment=$(workron wait-event settled payment.settled "$ORDER" --timeout "${TIMEOUT:-1h}") || code=$?
case $code in
0) ;;
3)  # the timeout passed first
	workron step refund -- sh -c 'echo "refunded $1" >> "${LOG:-/dev/null}"' refund "$charge"
	echo "payment of $ORDER not settled within ${TIMEOUT:-1h}" >&2
	exit 1 ;;
*) exit "$code" ;;
esac

workron step receipt -- sh -c 'echo "receipt for $1: $2" >> "${LOG:-/dev/null}"' receipt "$charge" "$payment"
